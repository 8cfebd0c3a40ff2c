"""Plain helpers shared by the review tests (and by jobs' and ops' tests): stored sanity
reports and diagnoses, candidates in the queue, and page helpers. The fixtures are in conftest.py."""

from datetime import timedelta

from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from review.models import SEVERITY_RANK, BenchmarkCandidate, DiagnosisIssue, LLMDiagnosis
from review.services import propose_candidates
from tasks.models import BenchmarkCategory, Task
from tasks.sanity import SOLUTION_RUN, SanityMaterial, SanityOutcome, store_report
from tasks.testing import make_task
from tasks.verification import CheckResult, CheckStatus

HTMX = {"HTTP_HX_REQUEST": "true"}


def sanity(revision, *, crashed=False, over_lenient=False, lazy=None, paying=None, solution=1.0):
    """A sanity report of the revision stored by tasks.sanity, as if its checker had scored so on the workspaces the
    sanity check plans for it (the scaffold and the lazy moves included): 0 everywhere but on the initial workspace,
    where an over-lenient one pays a lazy agent 1 through `out_exists` unless `lazy` (its score there) and `paying`
    (its paying checks) say otherwise; `crashed`: no run gave a score. `solution` is what the reference solution
    scored (1.0: the proof of solvability the accept gate asks for; None: the task has no reference solution).
    Whether that is crashed, over-lenient or solvable, and the lazy score, are tasks.sanity's verdict."""
    lazy = (1.0 if over_lenient else 0.0) if lazy is None else lazy
    paying = ({"out_exists": 1.0} if lazy else {}) if paying is None else paying
    status, reason = (CheckStatus.ERROR, "boom") if crashed else (CheckStatus.OK, "")
    ran = {"backend": "process", "isolated": False}
    material = SanityMaterial.from_revision(revision)
    plan = material.lazy_plan()
    runs = {kind: CheckResult(0.0, status, reason, **ran) for kind in plan.workspaces}
    runs["initial"] = CheckResult(lazy, status, reason, {**paying, "total_right": 0.0} if paying else {}, **ran)
    if solution is not None:
        runs[SOLUTION_RUN] = CheckResult(solution, CheckStatus.OK, "", **ran)
    outcome = SanityOutcome.of(plan, runs, settings.CLAWGYM_SANITY_TOLERANCE)
    return store_report(revision, material, outcome)


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
