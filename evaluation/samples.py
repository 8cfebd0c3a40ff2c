"""A run's samples (its rollouts, one a task and repeat), as Inspect's log viewer lists them: filtered by task,
status, outcome, score and text, for the samples page and the API alike; and the same task's rollouts of two runs,
paired for the side-by-side page with each check's result.

Reads only, in queries scoped to one run (or the filters the API is given): nothing here loads a run's transcripts but
the page's own rows when a text is searched for.
"""

import json
from dataclasses import dataclass

from django.db.models import F, Q

from .models import Rollout, ScanFinding

# ?sort= of the samples page and the API: every ordering ends on the task, the repeat and the id.
SAMPLE_SORTS = {
    "task": [F("revision__task__external_id").asc(), F("repeat_index").asc(), F("id").asc()],
    "score": [
        F("score").asc(nulls_first=True),
        F("revision__task__external_id").asc(),
        F("repeat_index").asc(),
        F("id").asc(),
    ],  # the worst first: unscored, then 0
    "-score": [
        F("score").desc(nulls_last=True),
        F("revision__task__external_id").asc(),
        F("repeat_index").asc(),
        F("id").asc(),
    ],
    "tokens": [
        (F("input_tokens") + F("output_tokens")).desc(nulls_last=True),
        F("revision__task__external_id").asc(),
        F("repeat_index").asc(),
        F("id").asc(),
    ],
}
SORT_LABELS = [
    ("task", "task, repeat"),
    ("score", "score ↑ (worst first)"),
    ("-score", "score ↓"),
    ("tokens", "tokens ↓"),
]
# Where a text search looks: the task's id and title, the model's final answer, why it failed or has no score, the
# checker's reason, and the transcript (as its JSON text: a quote or a line break in it is escaped there).
TEXT_FIELDS = (
    "revision__task__external_id",
    "revision__task__title",
    "final_message",
    "error",
    "score_reason",
    "check_reason",
    "transcript",
)
SNIPPET_CHARS = 80  # either side of a match


def filter_samples(rollouts, data: dict):
    """`rollouts` narrowed by what `data` holds (the validated query of the samples page or the API; absent or
    empty keys filter nothing): task (its id, exactly), status, outcome, min_score and max_score (inclusive; a
    rollout without a score matches neither), finding (a scanner that flagged it), q (a text, case-insensitive, in
    TEXT_FIELDS)."""
    if data.get("task"):
        rollouts = rollouts.filter(revision__task__external_id=data["task"])
    for name in ("status", "outcome"):
        if data.get(name):
            rollouts = rollouts.filter(**{name: data[name]})
    if data.get("min_score") is not None:
        rollouts = rollouts.filter(score__gte=data["min_score"])
    if data.get("max_score") is not None:
        rollouts = rollouts.filter(score__lte=data["max_score"])
    if data.get("finding"):  # flagged by that transcript scanner (evaluation.scanners)
        rollouts = rollouts.filter(pk__in=ScanFinding.objects.filter(scanner=data["finding"]).values("rollout_id"))
    text = (data.get("q") or "").strip()
    if text:
        found = Q()
        for name in TEXT_FIELDS:
            found |= Q(**{f"{name}__icontains": text})
        rollouts = rollouts.filter(found)
    return rollouts


def sorted_samples(rollouts, sort: str):
    return rollouts.order_by(*SAMPLE_SORTS.get(sort, SAMPLE_SORTS["task"]))


def snippet(rollout: Rollout, text: str) -> tuple[str, str, str, str] | None:
    """Where `text` occurs in the rollout, for its row: (where, before, the match, after), with SNIPPET_CHARS of
    context either side; None when it is not in the final message, the error, the reasons or a message's text (the
    task's id or title, or the JSON around a message, matched it)."""
    needle = text.strip().lower()
    if not needle:
        return None
    places = [
        ("final message", rollout.final_message),
        ("error", rollout.error),
        ("score reason", rollout.score_reason),
        ("checker", rollout.check_reason),
    ]
    for message in rollout.transcript or []:
        if isinstance(message, dict):
            places.append((str(message.get("role") or "message"), _message_text(message)))
    for where, body in places:
        at = (body or "").lower().find(needle)
        if at >= 0:
            start, end = max(0, at - SNIPPET_CHARS), at + len(needle)
            before = ("…" if start else "") + body[start:at]
            after = body[end : end + SNIPPET_CHARS] + ("…" if end + SNIPPET_CHARS < len(body) else "")
            return where, before, body[at:end], after
    return None


def _message_text(message: dict) -> str:
    """A chat message's text: its content (a string or parts), its reasoning, and its tool calls' names and
    arguments."""
    parts = []
    content = message.get("content")
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        parts += [str(p.get("text", "")) for p in content if isinstance(p, dict)]
    if message.get("reasoning"):
        parts.append(str(message["reasoning"]))
    for call in message.get("tool_calls") or []:
        if not isinstance(call, dict):
            continue
        call = call.get("function") if isinstance(call.get("function"), dict) else call  # the chat format nests it
        arguments = call.get("arguments", "")
        arguments = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        parts.append(f"{call.get('name', '')} {arguments}")
    return "\n".join(parts)


# --- two runs side by side -----------------------------------------------------------------------------------------


@dataclass
class CheckRow:
    """One check (a sub-score of the checker, or a rubric rule) and its result in each of the two rollouts."""

    name: str
    kind: str  # "check" or "rubric"
    a: float | None
    b: float | None

    @property
    def differs(self) -> bool:
        return self.a != self.b


def run_rollouts(run, task: str) -> list[Rollout]:
    """The run's rollouts of the task, by repeat."""
    rows = run.rollouts.filter(revision__task__external_id=task).select_related("revision__task", "endpoint")
    return list(rows.order_by("repeat_index", "id"))


def pick(rollouts: list[Rollout], repeat: str | int | None) -> Rollout | None:
    """The rollout of that repeat index, else the first one."""
    wanted = str(repeat) if repeat not in (None, "") else None
    return next((r for r in rollouts if str(r.repeat_index) == wanted), rollouts[0] if rollouts else None)


def check_rows(a: Rollout | None, b: Rollout | None) -> list[CheckRow]:
    """Every check either rollout was graded on, in name order, the checker's sub-scores first, then the rubric's
    rules (their judged score; None where a rule was not judged)."""
    sub_a, sub_b = (a.sub_scores if a else {}) or {}, (b.sub_scores if b else {}) or {}
    rows = [
        CheckRow(name, "check", _number(sub_a.get(name)), _number(sub_b.get(name)))
        for name in sorted(set(sub_a) | set(sub_b))
    ]
    rules_a, rules_b = _rubric(a), _rubric(b)
    rows += [
        CheckRow(name, "rubric", rules_a.get(name), rules_b.get(name)) for name in sorted(set(rules_a) | set(rules_b))
    ]
    return rows


def _rubric(rollout: Rollout | None) -> dict:
    judged = {}
    for judgement in (rollout.rubric_judgements if rollout else None) or []:
        if isinstance(judgement, dict) and judgement.get("rule"):
            judged[str(judgement["rule"])] = None if judgement.get("failed") else _number(judgement.get("score"))
    return judged


def _number(value):
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
