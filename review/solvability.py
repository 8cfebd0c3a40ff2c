"""The accept gate's reasons (accept_blocks, which services.decide and sanity_block ask on every path: pages, queue,
bulk, API), and the proof that a revision can score full marks that the gate needs.

    proof = proof_for(revision)     # a Proof, or None when nothing shows the revision solvable

A revision is proven solvable by
- its reference solution: the latest sanity report of the revision ran the solution and it scored at least
  tasks.sanity.SOLVED_SCORE (1.0). A reviewer's solve saved as the reference solution makes a new revision, whose
  sanity check then proves it the same way;
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

NOT_SANITY_CHECKED = "the checker of this revision has not been sanity-checked yet"
SOLUTION = "solution"
ROLLOUT = "rollout"

# The three ways to give proof, as the refusal and the candidate page say them.
HOW_TO_PROVE = (
    "add a reference solution that scores 1 (its sanity check then proves it), solve the task on the candidate "
    "page and save the solve as its reference solution, or have a rollout of this revision score full marks "
    "(it is found and linked by itself)"
)


@dataclass(frozen=True)
class Proof:
    """Why a revision is known to be solvable: `kind` (solution or rollout), the score, where to see it."""

    kind: str
    score: float
    description: str
    link: str = ""  # a page showing it: the rollout's, or the task revision's (its sanity card)
    report_id: int | None = None
    rollout_id: int | None = None

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
    return Proof(
        kind=SOLUTION,
        score=float(run["score"]),
        description=(
            f"the reference solution of r{revision.number} scored {float(run['score']):g} in its sanity check "
            f"of {report.created_at:%Y-%m-%d %H:%M} UTC"
        ),
        link=reverse("tasks:detail", args=[revision.task.external_id]) + f"?rev={revision.number}",
        report_id=report.pk,
    )


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
