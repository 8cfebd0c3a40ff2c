"""The accept gate's reasons (accept_blocks, which services.decide and sanity_block ask on every path: pages, queue,
bulk, API), and the proof that a revision can score full marks that the gate needs.

    proof = proof_for(revision)     # a Proof, or None when nothing shows the revision solvable

A revision is proven solvable by
- its reference solution: the latest sanity report of the revision ran the solution and it scored at least
  tasks.sanity.SOLVED_SCORE (1.0);
- a reviewer's solve in the browser: saved as the reference solution it makes a new revision (a SavedSolve), whose
  sanity check proves it the same way. The proof names the reviewer and that revision (kind "solve") while the
  revision's solution files are still the ones the solve saved;
- a rollout of exactly that revision that scored full marks (evaluation's Rollout; the proof links it).

The solution comes first: it is re-run on every sanity check of the revision, a rollout is a single run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from django.urls import reverse

from benchmarks.models import Benchmark
from evaluation.models import Rollout
from tasks.models import SanityReport, TaskRevision
from tasks.sanity import SOLVED_SCORE

from .models import SavedSolve

NOT_SANITY_CHECKED = "the checker of this revision has not been sanity-checked yet"
SOLUTION = "solution"
SOLVE = "solve"  # the reference solution is a reviewer's in-browser solve
ROLLOUT = "rollout"

# The three ways to give proof, as the refusal and the candidate page say them.
HOW_TO_PROVE = (
    "add a reference solution that scores 1 (its sanity check then proves it), solve the task on the candidate "
    "page and save the solve as its reference solution, or have a rollout of this revision score full marks "
    "(it is found and linked by itself)"
)


@dataclass(frozen=True)
class Proof:
    """Why a revision is known to be solvable: `kind` (solution, solve or rollout), the score, where to see it."""

    kind: str
    score: float
    description: str
    link: str = ""  # a page showing it: the rollout's, or the task revision's (its sanity card)
    report_id: int | None = None
    rollout_id: int | None = None
    reviewer: str = ""  # a solve's: who solved it
    saved_as: int | None = None  # a solve's: the number of the revision it was saved as

    def as_dict(self) -> dict:
        return {"proven": True, **asdict(self)}


def proof_for(revision: TaskRevision, *, report: SanityReport | None = None) -> Proof | None:
    """The proof that `revision` can score full marks, or None. `report`: its latest sanity report when the caller
    has it already (else it is looked up)."""
    report = report if report is not None else SanityReport.latest_for(revision).first()
    solution = _solution_proof(revision, report)
    if solution is not None:
        return solution
    rollout = solving_rollouts(revision).order_by("-score", "-finished_at", "-id").select_related("endpoint").first()
    if rollout is not None:
        return Proof(
            kind=ROLLOUT,
            score=rollout.score,
            description=(
                f"rollout #{rollout.pk} of r{revision.number} ({rollout.endpoint.name}, {rollout.harness}) "
                f"scored {rollout.score:g}"
            ),
            link=reverse("evaluation:detail", args=[rollout.pk]),
            rollout_id=rollout.pk,
        )
    return None


def solving_rollouts(revision_ref):
    """The scored rollouts of a revision that scored full marks; `revision_ref` may be an OuterRef (the queue asks
    in the query that lists its rows)."""
    return Rollout.objects.filter(revision=revision_ref, status=Rollout.Status.SCORED, score__gte=SOLVED_SCORE)


def _solution_proof(revision: TaskRevision, report: SanityReport | None) -> Proof | None:
    run = report.solution_run if report is not None else None
    if not run or run.get("status") != "ok" or float(run.get("score") or 0.0) < SOLVED_SCORE:
        return None
    score = float(run["score"])
    when = f"{report.created_at:%Y-%m-%d %H:%M} UTC"
    link = reverse("tasks:detail", args=[revision.task.external_id]) + f"?rev={revision.number}"
    solve = _saved_solve(revision)
    if solve is None:
        description = f"the reference solution of r{revision.number} scored {score:g} in its sanity check of {when}"
        return Proof(kind=SOLUTION, score=score, description=description, link=link, report_id=report.pk)
    who = solve.reviewer.get_username() if solve.reviewer else "a deleted reviewer"
    description = (
        f"{who}'s in-browser solve, saved as the reference solution in r{solve.revision.number}, scored {score:g} "
        f"in the sanity check of r{revision.number} of {when}"
    )
    return Proof(
        kind=SOLVE,
        score=score,
        description=description,
        link=link,
        report_id=report.pk,
        reviewer=who,
        saved_as=solve.revision.number,
    )


def _solution_files(revision: TaskRevision) -> list:
    return sorted(revision.files.filter(role="solution").values_list("path", "blob_id"))


def _saved_solve(revision: TaskRevision) -> SavedSolve | None:
    """The reviewer's solve whose files are `revision`'s reference solution: the latest one saved at or before it,
    when the solution files are still those it saved (a later edit of the solution makes it a plain solution)."""
    solve = (
        SavedSolve.objects.filter(revision__task_id=revision.task_id, revision__number__lte=revision.number)
        .select_related("reviewer", "revision")
        .order_by("-revision__number", "-id")
        .first()
    )
    if solve is None:
        return None
    if solve.revision_id != revision.pk and _solution_files(solve.revision) != _solution_files(revision):
        return None
    return solve


def missing_proof(revision: TaskRevision, *, report: SanityReport | None = None) -> str:
    """What is missing, in words, when proof_for found nothing (the refusal's reason; the way to give proof is
    HOW_TO_PROVE)."""
    report = report if report is not None else SanityReport.latest_for(revision).first()
    run = report.solution_run if report is not None else None
    if run:
        detail = f"{run['status']}: {run.get('reason') or ''}".rstrip(": ") if run["status"] != "ok" else ""
        scored = f"scored {float(run.get('score') or 0.0):g}"
        what = f"its reference solution {detail or scored}, not 1"
    else:
        what = "it has no reference solution"
    return (
        f"solvability is not proven: nothing shows that r{revision.number} can score full marks ({what}, and no "
        "rollout of it scored 1)"
    )


@dataclass(frozen=True)
class AcceptBlock:
    """One reason accepting is blocked, and what to do about it."""

    reason: str
    step: str


def accept_blocks(revision: TaskRevision, benchmark: Benchmark) -> list[AcceptBlock]:
    """Every reason accepting this revision into `benchmark` is blocked (none: it may be accepted).

    No sanity report blocks: the checker was never run. A checker that crashed blocks; so does one that pays a lazy
    agent more than the benchmark's tolerance (naming the checks that pay), a reference solution that does not score
    1, and a revision nothing has shown to be solvable (review.proof_for: its reference solution or a
    rollout of it scored full marks).
    """
    report = SanityReport.latest_for(revision).first()
    if report is None:
        return [AcceptBlock(NOT_SANITY_CHECKED, "run its sanity check first")]
    blocks = []
    fix_checker = "fix the checker (its sanity check runs again)"
    if report.crashed:
        crashes = [problem for problem in report.problems if problem.startswith("crashed")]
        blocks.append(
            AcceptBlock("the latest sanity check found the checker crashed: " + "; ".join(crashes), fix_checker)
        )
    if report.lazy_score > benchmark.lazy_tolerance:
        scores = ", ".join(f"{kind} {score:g}" for kind, score in report.lazy_scores.items())
        paying = report.paying_checks_text()
        blocks.append(
            AcceptBlock(
                f"a lazy agent earns {report.lazy_score:g} with this checker ({scores}), above the tolerance "
                f"{benchmark.lazy_tolerance:g} of {benchmark.name}"
                + (f"; the checks that pay: {paying}" if paying else ""),
                fix_checker,
            )
        )
    if report.solvable is False:
        run = report.solution_run or {}
        detail = f"{run.get('status')}: {run.get('reason')}" if run.get("status") != "ok" else ""
        blocks.append(
            AcceptBlock(
                f"unsolvable: the reference solution of r{revision.number} does not score 1 "
                f"({detail or 'it scored ' + format(float(run.get('score') or 0.0), 'g')})",
                "fix the reference solution or the checker until the solution scores 1",
            )
        )
    elif proof_for(revision, report=report) is None:
        blocks.append(AcceptBlock(missing_proof(revision, report=report), HOW_TO_PROVE))
    return blocks


def solvability(revision: TaskRevision | None) -> dict:
    """The proof as the API and pages show it: {"proven", "kind", "score", "description", "link", ...}; when there
    is none, "missing" says what is missing and "how" how to give it."""
    if revision is None:
        return {"proven": False, "kind": None, "missing": "the task has no revision", "how": HOW_TO_PROVE}
    report = SanityReport.latest_for(revision).first()
    proof = proof_for(revision, report=report)
    if proof is not None:
        return proof.as_dict()
    return {"proven": False, "kind": None, "missing": missing_proof(revision, report=report), "how": HOW_TO_PROVE}
