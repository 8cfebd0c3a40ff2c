"""The task score of one run: the code checker, then (when the task has a rubric) the judge, then the hybrid.

    result = score_run(revision, workspace, final_message, transcript)
    result.score, result.status, result.as_dict()      # the dict is what a rollout / run stores

    s_code   = the checker's score (tasks.verification.run_checker)
    s_rubric = Σ wj·qj / Σ wj over the rubric's rules (qj in {0, .25, .5, .75, 1}, from tasks.judging)
    s_task   = λ·s_code + (1−λ)·s_rubric, with λ = the revision's code_weight; a code-only task keeps s_code.

Statuses (ScoreStatus):
- ok: `score` is set. A checker that misbehaved still counts here with code score 0, as run_checker decides.
- incomplete: at least one rule has no valid judgement (the judge's answer stayed invalid after its repair, the call
  failed, or there is no judge endpoint). `score` and `rubric_score` are None, never a silent 0; the checker's
  result and the judgements that did succeed are kept. Retry by judging again (judge_rubric on the stored final
  files) and combining with combine().
- unscored: the checker could not run at all (sandbox_error): no score, and no judge is called; the run itself
  should be retried.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from sandbox import Backend, Limits, Workspace

from .judging import Judgement, JudgingError, judge_rubric, read_targets
from .judging import judge_endpoint as resolve_judge
from .package import DEFAULT_CODE_WEIGHT, validate_rubric
from .verification import CheckResult, CheckStatus, run_checker

REASON_CHARS = 600


class ScoreStatus(StrEnum):
    OK = "ok"
    INCOMPLETE = "incomplete"
    UNSCORED = "unscored"


@dataclass(frozen=True)
class TaskScore:
    code: CheckResult
    judgements: list[Judgement] = field(default_factory=list)
    code_weight: float = DEFAULT_CODE_WEIGHT  # λ; it only counts when the task has a rubric
    has_rubric: bool = False
    rubric_score: float | None = None
    score: float | None = None
    status: ScoreStatus = ScoreStatus.OK
    reason: str = ""  # why there is no score, or what to know about it (a checker that failed); '' when clean

    @property
    def ok(self) -> bool:
        return self.status is ScoreStatus.OK

    def as_dict(self) -> dict:
        """JSON for storage on a rollout or run (judgements with their reasons and ModelCall ids)."""
        return {
            "score": self.score,
            "status": str(self.status),
            "reason": self.reason,
            "code_score": self.code.score,
            "code": self.code.as_dict(),
            "has_rubric": self.has_rubric,
            "code_weight": self.code_weight,
            "rubric_score": self.rubric_score,
            "judgements": [j.as_dict() for j in self.judgements],
        }


def rubric_score(rubric: list[dict], judgements: Sequence[Judgement]) -> float | None:
    """Σ wj·qj / Σ wj over the rules, with each rule's weight from the rubric; None unless every rule was judged."""
    by_rule = {j.rule: j for j in judgements}
    total = weights = 0.0
    for rule in rubric:
        judged = by_rule.get(rule["name"])
        if judged is None or judged.failed or judged.score is None:
            return None
        total += float(rule["weight"]) * judged.score
        weights += float(rule["weight"])
    return total / weights


def combine(rubric: list[dict], code_weight: float, check: CheckResult, judgements: Sequence[Judgement]) -> TaskScore:
    """The task score from a checker result and the rubric's judgements (e.g. stored ones judged again later)."""
    rubric = validate_rubric(rubric)
    judgements = list(judgements)
    common = {"code": check, "judgements": judgements, "code_weight": float(code_weight), "has_rubric": bool(rubric)}
    if check.status is CheckStatus.SANDBOX_ERROR:
        reason = f"the checker could not run: {check.reason}; run it again"
        return TaskScore(**common, status=ScoreStatus.UNSCORED, reason=_short(reason))
    note = "" if check.ok else f"the checker ended {check.status}, code score 0: {check.reason}"
    if not rubric:
        return TaskScore(**common, score=check.score, reason=_short(note))
    rubric_value = rubric_score(rubric, judgements)
    if rubric_value is None:
        return TaskScore(**common, status=ScoreStatus.INCOMPLETE, reason=_short(_missing(rubric, judgements)))
    score = code_weight * check.score + (1.0 - code_weight) * rubric_value
    return TaskScore(**common, rubric_score=rubric_value, score=score, reason=_short(note))


def score_run(
    revision,
    workspace: Workspace,
    final_message: str = "",
    transcript: Sequence = (),
    *,
    judge_endpoint=None,
    subject: str = "",
    backend: Backend | None = None,
    limits: Limits | None = None,
) -> TaskScore:
    """Score a run's final `workspace` with `revision`'s checker and, when it has a rubric, its judge.

    The rubric's target files are read first: the checker gets the workspace next and may change it (run_checker
    installs reward/ there), so pass a workspace the caller may change. `judge_endpoint`: the endpoint to judge
    with (default: the first enabled one serving "judge"); `subject` labels the judge's ModelCall rows (e.g.
    "rollout:42"). Never raises for the checker or the judge: see the module docstring for the statuses.
    """
    rubric = validate_rubric(revision.rubric)
    targets = read_targets(rubric, workspace) if rubric else {}
    check = run_checker(revision, workspace, final_message, transcript, backend=backend, limits=limits)
    judgements: list[Judgement] = []
    if rubric and check.status is not CheckStatus.SANDBOX_ERROR:
        try:
            endpoint = resolve_judge(judge_endpoint)
        except JudgingError as exc:
            # The code score stands; the rubric waits for a judge, like any other failed judging.
            judgements = [_not_judged(rule, str(exc)) for rule in rubric]
        else:
            judgements = judge_rubric(revision, targets, final_message, endpoint=endpoint, subject=subject)
    return combine(rubric, revision.code_weight, check, judgements)


def _not_judged(rule: dict, error: str) -> Judgement:
    return Judgement(
        rule=rule["name"],
        weight=float(rule["weight"]),
        target_file=rule["target_file"],
        score=None,
        failed=True,
        error=error,
    )


def _missing(rubric: list[dict], judgements: Sequence[Judgement]) -> str:
    by_rule = {j.rule: j for j in judgements}
    problems = []
    for rule in rubric:
        judged = by_rule.get(rule["name"])
        if judged is None:
            problems.append(f"{rule['name']!r} was not judged")
        elif judged.failed or judged.score is None:
            problems.append(f"{rule['name']!r}: {judged.error or 'no score'}")
    return "rubric judging incomplete, no score until it is judged again: " + "; ".join(problems)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"
