"""Plain helpers shared by the review tests (and by jobs' and ops' tests): stored sanity
reports and diagnoses, candidates in the queue, and page helpers. The fixtures are in conftest.py."""

from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from review.models import SEVERITY_RANK, BenchmarkCandidate, DiagnosisIssue, LLMDiagnosis
from review.services import propose_candidates
from tasks.models import BenchmarkCategory, SanityReport, Task
from tasks.testing import make_task

HTMX = {"HTTP_HX_REQUEST": "true"}


def sanity(revision, *, crashed=False, over_lenient=False, lazy=None, paying=None, solution=1.0):
    """A stored sanity report of the revision with the given findings. An over-lenient one pays a lazy agent 1 on
    the initial workspace through `out_exists` unless `lazy` (its lazy score) and `paying` (its paying checks) say
    otherwise. `solution` is what its reference solution scored (1.0: the proof of solvability the accept gate
    asks for; None: the task has no reference solution)."""
    lazy = (1.0 if over_lenient else 0.0) if lazy is None else lazy
    paying = ({"out_exists": 1.0} if lazy else {}) if paying is None else paying
    run = {
        "score": 0.0,
        "status": "ok" if not crashed else "error",
        "reason": "boom" if crashed else "",
        "subscores": {},
    }
    initial = dict(run, score=lazy, subscores={**paying, "total_right": 0.0} if paying else {})
    return SanityReport.objects.create(
        revision=revision,
        runs={"empty": run, "initial": initial},
        crashed=crashed,
        over_lenient=over_lenient or lazy > 0,
        lazy_score=lazy,
        solution_run=None if solution is None else dict(run, score=solution, status="ok", reason=""),
        solvable=None if solution is None else solution >= 1.0,
        tolerance=0.0,
        backend="process",
        isolated=False,
    )


def add_diagnosis(candidate, issues):
    """A stored diagnosis of the candidate's current revision, as if the diagnosis job had run."""
    revision = candidate.task.current_revision
    diagnosis = LLMDiagnosis.objects.create(
        candidate=candidate, revision=revision, endpoint_name="diag", prompt_version="test", overall="ok"
    )
    for i, fields in enumerate(issues):
        fields = {"component": "instruction", "severity": "minor", "problem": f"problem {i}"} | fields
        DiagnosisIssue.objects.create(diagnosis=diagnosis, severity_rank=SEVERITY_RANK[fields["severity"]], **fields)
    BenchmarkCandidate.objects.filter(pk=candidate.pk).update(status=BenchmarkCandidate.Status.AWAITING_REVIEW)
    BenchmarkCandidate.refresh_worst_rank(BenchmarkCandidate.objects.filter(pk=candidate.pk))
    candidate.refresh_from_db()
    return diagnosis


def accept_all(benchmark, tasks, *, admin_user, reviewer):
    """Propose the tasks and accept every candidate of the benchmark, each with a passing sanity report."""
    from review.services import claim, decide

    propose_candidates(benchmark, tasks, user=admin_user)
    for candidate in BenchmarkCandidate.objects.filter(benchmark=benchmark):
        sanity(candidate.task.current_revision)
        claim(candidate, user=reviewer)
        decide(candidate, "accept", user=reviewer)


def row_html(response, candidate) -> str:
    html = response.content.decode()
    start = html.index(f'<tr id="candidate-{candidate.pk}"')
    return html[start : html.index("</tr>", start)]


def make_candidate(benchmark, external_id, *, title=None, category=None, issues=None, **fields):
    """A candidate of `benchmark`; `issues` (a list of severities) stores a diagnosis, `fields` are set last."""
    task = make_task(external_id, instruction=title or f"Work on {external_id}.")
    if category:
        Task.objects.filter(pk=task.pk).update(benchmark_category=BenchmarkCategory.objects.get(slug=category))
    candidate = BenchmarkCandidate.objects.create(task=task, benchmark=benchmark)
    if issues is not None:
        add_diagnosis(candidate, [{"severity": severity} for severity in issues])
    if fields:
        BenchmarkCandidate.objects.filter(pk=candidate.pk).update(**fields)
    candidate.refresh_from_db()
    return candidate


def claim_for(candidate, user, minutes=30):
    now = timezone.now()
    BenchmarkCandidate.objects.filter(pk=candidate.pk).update(
        claimed_by=user,
        claimed_at=now,
        claim_expires_at=now + timedelta(minutes=minutes),
        status=BenchmarkCandidate.Status.IN_REVIEW,
    )


def row(page, candidate):
    return page.locator(f"#candidate-{candidate.pk}")


def settled(page) -> None:
    """Wait until htmx has settled: it readies swapped-in content (links, forms) only then, and a click before that
    would be the browser's own navigation."""
    page.wait_for_function("!document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling, .htmx-added')")


def url(name, candidate, *args):
    return reverse(f"review:{name}", args=[candidate.pk, *args])


def text(response) -> str:
    return response.content.decode()


def save(client, candidate, field, content, base=1, path="", htmx=True, **extra):
    data = {"field": field, "path": path, "content": content, "base_revision": base, **extra}
    return client.post(url("candidate_edit", candidate), data, **(HTMX if htmx else {}))
