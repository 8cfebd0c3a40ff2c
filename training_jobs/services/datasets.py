"""Building training datasets: a selection of trajectories, filtered, guarded against benchmark contamination,
de-duplicated, split by task, frozen and content-hashed.

    dataset = build_dataset(selection={"eval_runs": [3]}, filters={"min_reward": 0.5}, user=admin)

A dataset is immutable: building always makes a new one (`create_dataset` writes its row, status building, and
`fill_dataset` does the work; `start_build` hands that to the `training_jobs.build_dataset` job). Every candidate
trajectory either becomes a sample or is counted under one reason, tried in this order:

    planted_flaw                 its task is a copy with a flaw planted to test the review (review.planting); no
                                 override: such a task is wrong on purpose
    benchmark_task               its task has a revision pinned by a benchmark version (unless an admin overrode it)
    benchmark_duplicate          its task is the same content as, or a near-duplicate of, a task a frozen version pins
                                 (training_jobs.contamination; the same override), listed in stats["contamination"]
    unverified_history           an assistant turn is no answer the proxy recorded in its session: history the agent
                                 sent of its own (Trajectory.unverified_turns; unless an admin overrode it)
    excluded_by_rules:<reason>   evaluation.trajectories left it out (auxiliary call, unsupported tools, …)
    incomplete                   its rollout did not end cleanly and scored (status scored, exit completed), or the
                                 conversation does not end with an assistant answer (complete_only)
    no_reward                    no score to select on
    below_min_reward             reward < min_reward
    too_long                     more tokens than max_tokens
    near_duplicate               the same task and the same final conversation as a sample already kept

A sample's tokens are counted with the tokenizer that will train on it when the dataset is given a base model (or a
tokenizer folder): the tokenized sample as the SFT trainer renders it, with where its assistant tokens are
(training_jobs.token_counts), so `max_tokens` and a run's max_length mean the same thing. Without one they are the
usage estimate (sample_tokens), and the pages say so. A build that keeps nothing is "empty", with the reason
(empty_reason), and training refuses it.

Samples are ordered by (task, content digest), so the order, the split and the dataset's sha256 depend on what the
trajectories say, not on their ids: the same selection and filters over the same trajectories give the same hash.
No torch, transformers or datasets here: the web process imports this module (the tokenizer runs in a subprocess).
"""

import contextlib
import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from accounts.roles import ADMIN, has_role
from benchmarks.models import PinnedRevision
from evaluation.harnesses import ExitReason
from evaluation.models import EvalRun, Rollout, Trajectory
from jobs import enqueue
from jobs.engine import JobEngineError
from llm.models import ModelCall
from tasks.models import Task

from ..base_models import BaseModelError, folder_facts
from ..contamination import duplicate_task_ids, selection_contamination
from ..dataset_stats import dataset_statistics
from ..job_kinds import BUILD_JOB
from ..models import BaseModel, DatasetSample, TrainingDataset
from ..token_counts import TokenCounter, TokenCountError, tokenizer_sha256

SELECTION_KEYS = ("eval_runs", "groups", "endpoints", "harnesses", "sources", "since", "until")
DEFAULT_FILTERS = {
    "min_reward": 0.5,  # the reference's threshold (0.4–0.9 swept; 0.5 best)
    "max_tokens": None,
    "complete_only": True,
    "dedup": True,
    "validation_share": 0.05,
    "seed": 0,
}
CHUNK = 500  # trajectories read at a time while building
REASONS = (
    "planted_flaw",
    "benchmark_task",
    "benchmark_duplicate",
    "unverified_history",
    "excluded_by_rules",
    "incomplete",
    "no_reward",
    "below_min_reward",
    "too_long",
    "near_duplicate",
)


class DatasetError(ValueError):
    """A selection, filter or override that cannot be built; the message says what to change."""


# --- what was asked ----------------------------------------------------------------------------------------------


def normalize_selection(selection: dict) -> dict:
    """The selection with only known keys, lists sorted and de-duplicated (so equal asks compare equal)."""
    unknown = set(selection) - set(SELECTION_KEYS)
    if unknown:
        raise DatasetError(f"unknown selection key(s) {sorted(unknown)}; known: {', '.join(SELECTION_KEYS)}")
    normal = {}
    for key in SELECTION_KEYS[:5]:
        values = selection.get(key) or []
        if isinstance(values, (str, int)):
            values = [values]
        values = sorted({int(v) if key == "eval_runs" else str(v) for v in values})
        if values:
            normal[key] = values
    for key in ("since", "until"):
        value = selection.get(key)
        if value:
            moment = value if isinstance(value, datetime) else parse_datetime(str(value))
            if moment is None:
                raise DatasetError(f"{key}: not a date and time: {value!r} (e.g. 2026-11-30T00:00:00Z)")
            if timezone.is_naive(moment):
                moment = timezone.make_aware(moment, timezone.get_current_timezone())
            normal[key] = moment.isoformat()
    if not any(k in normal for k in ("eval_runs", "groups", "endpoints", "harnesses", "sources")):
        raise DatasetError("select at least one evaluation run, rollout group, endpoint, harness or task source")
    missing_runs = set(normal.get("eval_runs", [])) - set(
        EvalRun.objects.filter(pk__in=normal.get("eval_runs", [])).values_list("pk", flat=True)
    )
    if missing_runs:
        raise DatasetError(f"no evaluation run {', '.join(f'#{pk}' for pk in sorted(missing_runs))}")
    missing_groups = set(normal.get("groups", [])) - set(
        Rollout.objects.filter(group__in=normal.get("groups", [])).values_list("group", flat=True).distinct()
    )
    if missing_groups:
        raise DatasetError(f"no rollout group {', '.join(sorted(missing_groups))}")
    return normal


def normalize_filters(filters: dict | None) -> dict:
    filters = dict(filters or {})
    unknown = set(filters) - set(DEFAULT_FILTERS)
    if unknown:
        raise DatasetError(f"unknown filter(s) {sorted(unknown)}; known: {', '.join(DEFAULT_FILTERS)}")
    normal = {**DEFAULT_FILTERS, **{k: v for k, v in filters.items() if v is not None or k == "max_tokens"}}
    if normal["min_reward"] is not None:
        normal["min_reward"] = float(normal["min_reward"])
    if normal["max_tokens"] is not None:
        normal["max_tokens"] = int(normal["max_tokens"])
        if normal["max_tokens"] < 1:
            raise DatasetError("max_tokens must be at least 1 (or left out for no limit)")
    share = normal["validation_share"] = float(normal["validation_share"])
    if not 0 <= share < 1:
        raise DatasetError(f"validation_share must be in [0, 1), not {share}")
    normal["seed"] = int(normal["seed"])
    normal["complete_only"], normal["dedup"] = bool(normal["complete_only"]), bool(normal["dedup"])
    return normal


def selected_trajectories(selection: dict):
    """The trajectories a (normalized) selection names: those of its runs and groups (either), narrowed by endpoint,
    harness, task source and creation date."""
    queryset = Trajectory.objects.all()
    runs, groups = selection.get("eval_runs"), selection.get("groups")
    if runs and groups:
        queryset = queryset.filter(rollout__eval_run_id__in=runs) | queryset.filter(rollout__group__in=groups)
    elif runs:
        queryset = queryset.filter(rollout__eval_run_id__in=runs)
    elif groups:
        queryset = queryset.filter(rollout__group__in=groups)
    if selection.get("endpoints"):
        queryset = queryset.filter(rollout__endpoint__name__in=selection["endpoints"])
    if selection.get("harnesses"):
        queryset = queryset.filter(rollout__harness__in=selection["harnesses"])
    if selection.get("sources"):
        queryset = queryset.filter(rollout__revision__task__source__in=selection["sources"])
    if selection.get("since"):
        queryset = queryset.filter(rollout__created_at__gte=parse_datetime(selection["since"]))
    if selection.get("until"):
        queryset = queryset.filter(rollout__created_at__lt=parse_datetime(selection["until"]))
    return queryset


# --- one trajectory's figures ------------------------------------------------------------------------------------


def content_digest(task: str, messages: list, tools: list) -> str:
    """What a sample says (its task, conversation and tools), hashed: ids, rewards and dates left out."""
    text = json.dumps(
        {"task": task, "messages": messages, "tools": tools},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()


def _text(content) -> str:
    if isinstance(content, list):
        return "".join(p.get("text") or "" for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def _arguments(call: dict):
    arguments = (call.get("function") or {}).get("arguments") if isinstance(call, dict) else None
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except json.JSONDecodeError:
            return arguments.strip()
    return arguments


def conversation_digest(messages: list) -> str:
    """What makes two conversations the same for de-duplication: each message's role, text (ends stripped) and tool
    calls (name and parsed arguments). Tool call ids, reasoning and serialisation differ between rollouts that said
    the same thing, so they are left out."""
    key = []
    for m in messages:
        if not isinstance(m, dict):
            continue
        calls = [
            [(c.get("function") or {}).get("name"), _arguments(c)]
            for c in m.get("tool_calls") or []
            if isinstance(c, dict)
        ]
        key.append([m.get("role"), _text(m.get("content")).strip(), calls])
    text = json.dumps(key, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def ends_with_answer(messages: list) -> bool:
    """The conversation ends with the assistant's own answer (not a tool call awaiting its result)."""
    if not messages or not isinstance(messages[-1], dict):
        return False
    last = messages[-1]
    return last.get("role") == "assistant" and not last.get("tool_calls")


def rollout_complete(rollout: Rollout) -> bool:
    """The agent finished on its own and its workspace was scored."""
    return rollout.status == Rollout.Status.SCORED and rollout.exit_reason in ("", ExitReason.COMPLETED)


def sample_tokens(stats: dict, last_call_usage: tuple[int | None, int | None] | None) -> int:
    """The trajectory's length as a training sample: its last model call's prompt + answer (the whole conversation
    as the model saw it) when that call was recorded with its usage; else stats["tokens"], else stats["total_tokens"]
    (which sums every call's prompt, so it over-counts: only trajectories without recorded calls fall back to it)."""
    if last_call_usage and last_call_usage[0] is not None:
        return int(last_call_usage[0]) + int(last_call_usage[1] or 0)
    return int(stats.get("tokens") or stats.get("total_tokens") or 0)


@dataclass
class Candidate:
    trajectory_id: int
    task: str
    task_id: int
    reward: float | None
    tokens: int
    digest: str
    final_digest: str
    reason: str = ""
    spans: list = field(default_factory=list)  # the assistant tokens' [start, end), when counted with a tokenizer


def split_tasks(tasks: list[str], *, share: float, seed: int) -> set[str]:
    """The tasks of the validation side: the first round(share·n) of the tasks ranked by sha256(seed:task) (at least
    one when share > 0 and there are two tasks or more). Seeded, and a task keeps its side when others are added."""
    if share <= 0 or len(tasks) < 2:
        return set()
    count = min(len(tasks) - 1, max(1, round(share * len(tasks))))
    ranked = sorted(tasks, key=lambda t: hashlib.sha256(f"{seed}:{t}".encode()).hexdigest())
    return set(ranked[:count])


# --- building ----------------------------------------------------------------------------------------------------


def check_override(user, allow_benchmark_tasks: bool, override_reason: str, *, guard: str = "benchmark_tasks") -> None:
    if not allow_benchmark_tasks:
        return
    what = {
        "benchmark_tasks": ("benchmark tasks", "the contamination guard's override"),
        "unverified_history": ("trajectories with unverified history", "the history guard's override"),
    }
    included, override = what[guard]
    if user is None or not has_role(user, ADMIN):
        raise DatasetError(f"only an admin may include {included} ({override})")
    if not (override_reason or "").strip():
        raise DatasetError(f"including {included} needs a reason: it is written on the dataset")


def tokenizer_folder(base_model: BaseModel | None, tokenizer_path: str) -> str:
    """The folder whose tokenizer counts the samples (the base model's, or one given), checked to hold a model's
    config and tokenizer; blank when neither is given (the usage estimate)."""
    path = (tokenizer_path or "").strip() or (base_model.path if base_model else "")
    if path:
        try:
            folder_facts(path)
        except BaseModelError as exc:
            raise DatasetError(f"the base model to count tokens with: {exc}") from None
    return path


def create_dataset(
    *,
    selection: dict,
    filters: dict | None = None,
    name: str = "",
    user,
    allow_benchmark_tasks: bool = False,
    override_reason: str = "",
    allow_unverified_history: bool = False,
    unverified_history_reason: str = "",
    base_model: BaseModel | None = None,
    tokenizer_path: str = "",
) -> TrainingDataset:
    """The dataset's row, status building, with what was asked (validated): nothing is selected yet. `base_model`
    (or `tokenizer_path`, a model folder): whose tokenizer counts the samples' tokens."""
    selection = normalize_selection(selection)
    filters = normalize_filters(filters)
    check_override(user, allow_benchmark_tasks, override_reason)
    check_override(user, allow_unverified_history, unverified_history_reason, guard="unverified_history")
    tokenizer_path = tokenizer_folder(base_model, tokenizer_path)
    user = user if user is not None and user.is_authenticated else None
    return TrainingDataset.objects.create(
        base_model=base_model,
        tokenizer_path=tokenizer_path,
        name=name.strip()[:200],
        selection=selection,
        filters=filters,
        allow_benchmark_tasks=allow_benchmark_tasks,
        override_reason=override_reason.strip() if allow_benchmark_tasks else "",
        override_by=user if allow_benchmark_tasks else None,
        created_by=user,
        allow_unverified_history=allow_unverified_history,
        unverified_history_reason=unverified_history_reason.strip() if allow_unverified_history else "",
        unverified_history_by=user if allow_unverified_history else None,
    )


def _candidates(dataset: TrainingDataset, counter: TokenCounter | None, duplicates: set) -> list[Candidate]:
    filters = dataset.filters
    # By task: a task with any revision in any benchmark version is out, whichever revision the rollout ran.
    pinned_tasks = set(PinnedRevision.objects.values_list("revision__task_id", flat=True).distinct())
    pinned_tasks = {**dict.fromkeys(duplicates, "benchmark_duplicate"), **dict.fromkeys(pinned_tasks, "benchmark_task")}
    planted = planted_task_ids()
    rows = (
        selected_trajectories(dataset.selection)
        .select_related("rollout__revision__task")
        .only(
            "id",
            "messages",
            "tools",
            "reward",
            "stats",
            "excluded",
            "exclusion_reason",
            "model_call_ids",
            "unverified_turns",
            "rollout__status",
            "rollout__exit_reason",
            "rollout__revision__task__external_id",
            "rollout__revision__task__id",
        )
        .order_by("pk")
    )
    candidates = []
    # In chunks, keeping only digests: a large selection's conversations are never all in memory at once.
    chunk: list[Trajectory] = []
    for trajectory in rows.iterator(chunk_size=CHUNK):
        chunk.append(trajectory)
        if len(chunk) == CHUNK:
            candidates += _judge(chunk, dataset, pinned_tasks, counter, planted)
            chunk = []
    candidates += _judge(chunk, dataset, pinned_tasks, counter, planted)
    # Near-duplicates: within a task, one sample per conversation (conversation_digest): the best rewarded, then the
    # first by content digest (so which one is kept depends on what they say, not on their ids).
    kept = sorted(
        (c for c in candidates if not c.reason),
        key=lambda c: (c.task, c.final_digest, -(c.reward or 0), c.digest, c.trajectory_id),
    )
    seen = set()
    for c in kept:
        key = (c.task, c.final_digest)
        if filters["dedup"] and key in seen:
            c.reason = "near_duplicate"
        seen.add(key)
    return candidates


def planted_task_ids() -> set[int]:
    """The tasks that are copies with a planted flaw (review.planting), named through the ORM's reverse relations
    (tasks.Task → review's candidates → their plant) so that training_jobs imports nothing of review."""
    return set(Task.objects.filter(benchmark_candidates__plant__isnull=False).values_list("pk", flat=True))


def _judge(
    rows: list, dataset: TrainingDataset, pinned_tasks: set, counter: TokenCounter | None, planted: set = frozenset()
) -> list[Candidate]:
    """Each trajectory as a candidate with the first reason it is left out for (blank: kept so far). With a counter,
    those that get as far as the token limit are tokenized (the others never need it)."""
    filters = dataset.filters
    last_calls = [t.model_call_ids[-1] for t in rows if t.model_call_ids]
    usage = {
        pk: (i, o)
        for pk, i, o in ModelCall.objects.filter(pk__in=last_calls).values_list("pk", "input_tokens", "output_tokens")
    }
    candidates = []
    for t in rows:
        task = t.rollout.revision.task
        last = usage.get(t.model_call_ids[-1]) if t.model_call_ids else None
        c = Candidate(
            t.pk,
            task.external_id,
            task.pk,
            t.reward,
            sample_tokens(t.stats or {}, last),
            content_digest(task.external_id, t.messages, t.tools),
            conversation_digest(t.messages),
        )
        if task.pk in planted:
            c.reason = "planted_flaw"
        elif task.pk in pinned_tasks and not dataset.allow_benchmark_tasks:
            c.reason = pinned_tasks[task.pk]
        elif t.unverified_turns and not dataset.allow_unverified_history:
            c.reason = "unverified_history"
        elif t.excluded:
            c.reason = f"excluded_by_rules:{t.exclusion_reason or 'unspecified'}"
        elif filters["complete_only"] and not (rollout_complete(t.rollout) and ends_with_answer(t.messages)):
            c.reason = "incomplete"
        elif t.reward is None:
            c.reason = "no_reward"
        elif filters["min_reward"] is not None and t.reward < filters["min_reward"]:
            c.reason = "below_min_reward"
        else:
            if counter is not None:
                counted = counter.count({"messages": t.messages, "tools": t.tools})
                c.tokens, c.spans = counted.tokens, [list(span) for span in counted.spans]
            if filters["max_tokens"] is not None and c.tokens > filters["max_tokens"]:
                c.reason = "too_long"
        candidates.append(c)
    return candidates


def fill_dataset(dataset: TrainingDataset) -> TrainingDataset:
    """Select, filter, split and hash the dataset's samples (tokenized with its tokenizer, when it has one), and its
    statistics: status ready, or empty when nothing is kept. A dataset built already is returned as it is (a job
    delivered twice builds once)."""
    dataset.refresh_from_db()
    if dataset.status in (TrainingDataset.Status.READY, TrainingDataset.Status.EMPTY):
        return dataset
    try:
        tokenizer_digest = tokenizer_sha256(dataset.tokenizer_path) if dataset.tokenizer_path else ""
        selected = selected_trajectories(dataset.selection)
        findings = [] if dataset.allow_benchmark_tasks else selection_contamination(dataset, selected)
        with TokenCounter(dataset.tokenizer_path) if dataset.tokenizer_path else contextlib.nullcontext() as counter:
            candidates = _candidates(dataset, counter, duplicate_task_ids(findings))
        excluded = Counter(c.reason for c in candidates if c.reason)
        kept = sorted((c for c in candidates if not c.reason), key=lambda c: (c.task, c.digest, c.trajectory_id))
        filters = dataset.filters
        validation = split_tasks(
            sorted({c.task for c in kept}), share=filters["validation_share"], seed=filters["seed"]
        )
        digest = hashlib.sha256()
        samples = []
        for position, c in enumerate(kept):
            split = DatasetSample.Split.VALIDATION if c.task in validation else DatasetSample.Split.TRAIN
            digest.update(f"{c.digest} {split}\n".encode())
            samples.append(
                DatasetSample(
                    dataset=dataset,
                    position=position,
                    trajectory_id=c.trajectory_id,
                    split=split,
                    task_external_id=c.task,
                    reward=c.reward,
                    tokens=c.tokens,
                    assistant_spans=c.spans,
                )
            )
        with transaction.atomic():
            DatasetSample.objects.filter(dataset=dataset).delete()
            DatasetSample.objects.bulk_create(samples, batch_size=1000)
            dataset.sha256 = digest.hexdigest()
            dataset.trajectories_count = len(samples)
            dataset.excluded = dict(sorted(excluded.items(), key=lambda item: (-item[1], item[0])))
            dataset.tokenizer_sha256 = tokenizer_digest
            dataset.stats = dataset_statistics(dataset, candidates=len(candidates))
            dataset.stats["contamination"] = [f.as_dict() for f in findings[:100]]
            dataset.status = TrainingDataset.Status.READY if samples else TrainingDataset.Status.EMPTY
            dataset.error = ""
            dataset.built_at = timezone.now()
            if not dataset.name:
                dataset.name = f"dataset {dataset.built_at:%Y-%m-%d %H:%M} ({len(samples)} trajectories)"
            dataset.save(
                update_fields=[
                    "sha256",
                    "trajectories_count",
                    "excluded",
                    "stats",
                    "status",
                    "error",
                    "built_at",
                    "name",
                    "tokenizer_sha256",
                ]
            )  # not job_run: start_build may be writing it
    except TokenCountError as exc:
        error = f"counting tokens with {dataset.tokenizer_path}: {exc}"
        TrainingDataset.objects.filter(pk=dataset.pk).update(status=TrainingDataset.Status.FAILED, error=error)
        raise DatasetError(error) from None
    except Exception as exc:
        TrainingDataset.objects.filter(pk=dataset.pk).update(
            status=TrainingDataset.Status.FAILED, error=f"{type(exc).__name__}: {exc}"
        )
        raise
    return dataset


def build_dataset(
    *, selection: dict, filters: dict | None = None, name: str = "", user, **overrides
) -> TrainingDataset:
    """A new dataset built here and now (the command's way; pages and the API queue `start_build`). `overrides`:
    create_dataset's allow_benchmark_tasks / override_reason and allow_unverified_history /
    unverified_history_reason (an admin's, with a reason)."""
    dataset = create_dataset(selection=selection, filters=filters, name=name, user=user, **overrides)
    return fill_dataset(dataset)


def start_build(*, selection: dict, filters: dict | None = None, name: str = "", user, **overrides) -> TrainingDataset:
    """A new dataset, status building, its job queued (raises jobs.engine.JobEngineError when it cannot be)."""
    dataset = create_dataset(selection=selection, filters=filters, name=name, user=user, **overrides)
    try:
        run = enqueue(BUILD_JOB, created_by=user, dataset_id=dataset.pk)
    except JobEngineError as exc:
        TrainingDataset.objects.filter(pk=dataset.pk).update(status=TrainingDataset.Status.FAILED, error=str(exc))
        raise
    TrainingDataset.objects.filter(pk=dataset.pk).update(job_run=run)
    dataset.job_run = run
    return dataset


def summary(dataset: TrainingDataset) -> dict:
    """The `build_dataset --json` shape."""
    return {
        "dataset": dataset.pk,
        "status": dataset.status,
        "empty_reason": empty_reason(dataset),
        "sha256": dataset.sha256,
        "trajectories": dataset.trajectories_count,
        "excluded": dataset.excluded,
        "tokens_counted_with": dataset.tokenizer_path if dataset.tokenized else "usage estimate",
    }


# What each reason makes of a trajectory, for the empty dataset's reason (singular, plural).
LEFT_OUT_AS = {
    "planted_flaw": (
        "is a planted flaw's task (a test of the review)",
        "are planted flaws' tasks (a test of the review)",
    ),
    "benchmark_task": (
        "is a benchmark task (the contamination guard)",
        "are benchmark tasks (the contamination guard)",
    ),
    "benchmark_duplicate": (
        "is a benchmark task's duplicate or paraphrase (the contamination guard)",
        "are benchmark tasks' duplicates or paraphrases (the contamination guard)",
    ),
    "unverified_history": ("has unverified history (the history guard)", "have unverified history (the history guard)"),
    "excluded_by_rules": ("was excluded by the rules", "were excluded by the rules"),
    "incomplete": ("is incomplete", "are incomplete"),
    "no_reward": ("has no reward", "have no reward"),
    "below_min_reward": ("is rewarded below {min_reward}", "are rewarded below {min_reward}"),
    "too_long": ("is longer than {max_tokens} tokens", "are longer than {max_tokens} tokens"),
    "near_duplicate": ("is a near-duplicate", "are near-duplicates"),
}


def empty_reason(dataset: TrainingDataset) -> str:
    """Why an empty dataset holds nothing, e.g. "all 28 trajectories are benchmark tasks (the contamination guard),
    excluded"; blank for any other status."""
    if dataset.status != TrainingDataset.Status.EMPTY:
        return ""
    by_kind = Counter()
    for reason, count in (dataset.excluded or {}).items():
        by_kind[exclusion_kind(reason)] += count
    total = sum(by_kind.values())
    if not total:
        return "the selection holds no trajectory"
    filters = {"min_reward": dataset.filters.get("min_reward"), "max_tokens": dataset.filters.get("max_tokens")}

    def said(kind: str, count: int) -> str:
        singular, plural = LEFT_OUT_AS.get(kind, ("was left out: " + kind, "were left out: " + kind))
        return (singular if count == 1 else plural).format(**filters)

    if len(by_kind) == 1:
        kind = next(iter(by_kind))
        return f"{'the one trajectory' if total == 1 else f'all {total} trajectories'} {said(kind, total)}, excluded"
    parts = [f"{count} {said(kind, count)}" for kind, count in by_kind.most_common()]
    return f"all {total} trajectories were left out: " + "; ".join(parts)


def exclusion_kind(reason: str) -> str:
    """The reason's family (excluded_by_rules:<why> → excluded_by_rules)."""
    return reason.split(":", 1)[0]
