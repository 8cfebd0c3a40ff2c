"""Forms of the reviewers' pages, one section a page (review/views/<page>.py renders and posts them)."""

import re
from functools import cached_property

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import F, Q

from accounts.roles import REVIEWER, has_role
from benchmarks.models import Benchmark
from evaluation.harnesses import HARNESS_CHOICES
from evaluation.services.rollouts import MAX_REPEATS
from lib.bounds import parse_id
from llm.models import ModelEndpoint
from tasks.models import BenchmarkCategory, SanityReport, Task

from . import edits, planting, quality, team
from .models import (
    QUALITY_DIMENSIONS,
    QUALITY_SCALE,
    BenchmarkCandidate,
    DifficultyVerdict,
    PlantedFlaw,
    ReviewDecision,
    Severity,
)
from .serializers import CandidateFilterSerializer

Decision = ReviewDecision.Decision
Status = BenchmarkCandidate.Status


# --- the queue -------------------------------------------------------------------------------------------------


# Candidates awaiting a diagnosis whose last attempt failed get a tab of their own: a person reviews them (or an admin
# diagnoses them again) instead of waiting for a diagnosis nothing is making.
DIAGNOSIS_FAILED = "diagnosis_failed"
QUEUE_STATUSES = [
    (Status.AWAITING_DIAGNOSIS, Status.AWAITING_DIAGNOSIS.label),
    (DIAGNOSIS_FAILED, "Diagnosis failed"),
    *((value, label) for value, label in Status.choices if value != Status.AWAITING_DIAGNOSIS),
]

# name: (label, ordering). Every ordering ends on a unique key so that pages never overlap.
SORTS = {
    "updated": ("Recently updated", [F("updated_at").desc(), F("id").desc()]),
    "severity": (
        "Worst severity first",
        [F("worst_rank").asc(nulls_last=True), F("updated_at").desc(), F("id").desc()],
    ),
    "task": ("Task id", [F("task__external_id").asc(), F("id").asc()]),
    "category": (
        "Category",
        [F("task__benchmark_category__order").asc(nulls_last=True), F("task__external_id").asc(), F("id").asc()],
    ),
    "strong": ("Strong agent mean, lowest first", [F("strong_mean").asc(nulls_last=True), F("id").asc()]),
    # `lazy_score`: annotated by _rows. Never sanity-checked: last.
    "lazy": (
        "Lazy score, highest first",
        [F("lazy_score").desc(nulls_last=True), F("updated_at").desc(), F("id").desc()],
    ),
    # `likely_valid`: annotated by queue() (review.precision). Not diagnosed, or no issues: last.
    "likely": (
        "Issues most likely valid first",
        [F("likely_valid").desc(nulls_last=True), F("worst_rank").asc(nulls_last=True), F("id").desc()],
    ),
}


class QueueFilterForm(forms.Form):
    """The queue's filters and sort. Invalid values are dropped one by one rather than failing the page.

    It validates and renders; the filtering itself is the API's (CandidateFilterSerializer.filter), so the page and
    /api/candidates/ always agree on what a filter means. Only the free-text search is the page's own.
    """

    q = forms.CharField(required=False, max_length=200, label="Search")
    benchmark = forms.ChoiceField(required=False)
    category = forms.ChoiceField(required=False)
    severity = forms.ChoiceField(
        choices=[("", "Any severity"), *Severity.choices, ("none", "No issues or not diagnosed")], required=False
    )
    status = forms.ChoiceField(choices=[("", "All statuses"), *QUEUE_STATUSES], required=False)
    mine = forms.BooleanField(required=False, label="Claimed by me")
    # What a lazy agent earns with the checker of the task's current revision, above one of the thresholds.
    lazy = forms.ChoiceField(
        choices=[("", "Any"), *((f"{t:g}", f"Lazy agent earns > {t:g}") for t in SanityReport.LAZY_THRESHOLDS)],
        required=False,
        label="Lazy score",
    )
    # The verdict of the latest difficulty filter (review.difficulty).
    difficulty = forms.ChoiceField(
        choices=[("", "Any"), *DifficultyVerdict.choices, ("none", "Not filtered")], required=False, label="Difficulty"
    )
    sort = forms.ChoiceField(choices=[(name, label) for name, (label, _) in SORTS.items()], required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        names = list(Benchmark.objects.values_list("name", flat=True))
        self.fields["benchmark"].choices = [("", "All benchmarks"), *((n, n) for n in names)]
        categories = BenchmarkCategory.objects.values_list("slug", "name")
        self.fields["category"].choices = [("", "All categories"), *categories]
        self.is_valid()  # cleaned_data then holds the valid fields only

    @property
    def sort_name(self) -> str:
        return self.cleaned_data.get("sort") or "updated"

    def candidates(self, request, *, with_status: bool = True):
        """The filtered candidates (unordered), by status too unless `with_status` is False (the status counts)."""
        data = self.cleaned_data
        shared = {
            name: data[name] for name in ("benchmark", "status", "category", "severity", "difficulty") if data.get(name)
        }
        if data.get("mine"):
            shared["mine"] = True
        if data.get("lazy"):
            shared["lazy_above"] = data["lazy"]
        if not with_status:
            shared.pop("status", None)
        elif shared.get("status") == DIAGNOSIS_FAILED:
            shared.update(status=Status.AWAITING_DIAGNOSIS, diagnosis_failed=True)
        elif shared.get("status") == Status.AWAITING_DIAGNOSIS:
            shared["diagnosis_failed"] = False
        candidates = BenchmarkCandidate.objects.order_by()
        api_filters = CandidateFilterSerializer(data=shared, context={"request": request})
        api_filters.is_valid(raise_exception=True)  # the form accepted exactly these values
        candidates = api_filters.filter(candidates)
        q = data.get("q", "").strip()
        if q:
            candidates = candidates.filter(Q(task__external_id__icontains=q) | Q(task__title__icontains=q))
        return candidates


class DecisionForm(forms.Form):
    """Accept, fix or reject: what the queue's and the candidate page's decision dialogs post."""

    decision = forms.ChoiceField(choices=[(d.value, d.label) for d in (Decision.ACCEPT, Decision.FIX, Decision.REJECT)])
    reason = forms.CharField(required=False, max_length=10_000, widget=forms.Textarea(attrs={"rows": 3}))
    override_reason = forms.CharField(
        required=False,
        max_length=10_000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Admins only: why to accept although the sanity check failed or has not run.",
    )

    def clean(self):
        data = super().clean()
        if data.get("decision") == Decision.REJECT and not data.get("reason", "").strip():
            self.add_error("reason", "Rejecting needs a reason.")
        return data


class CandidateIdsField(forms.Field):
    """The candidates ticked in the queue: every `ids` value of the form, as ids, each once."""

    widget = forms.MultipleHiddenInput
    default_error_messages = {"required": "Select at least one candidate.", "invalid": "Not a candidate id: %(value)s."}

    def to_python(self, value):
        ids = []
        for item in value or []:
            pk = parse_id(item)
            if pk is None:
                shown = str(item) if len(str(item)) <= 40 else f"{str(item)[:40]}…"
                raise forms.ValidationError(self.error_messages["invalid"], code="invalid", params={"value": shown})
            ids.append(pk)
        return list(dict.fromkeys(ids))


class BulkDecisionForm(forms.Form):
    """Accept or reject the ticked candidates of the queue at once (review.bulk.decide_many)."""

    ids = CandidateIdsField()
    decision = forms.ChoiceField(choices=[(Decision.ACCEPT, "Accept"), (Decision.REJECT, "Reject")])
    reason = forms.CharField(required=False, max_length=10_000)

    def clean(self):
        data = super().clean()
        if data.get("decision") == Decision.REJECT and not data.get("reason", "").strip():
            self.add_error("reason", "Rejecting needs a reason.")
        return data


# --- one candidate ---------------------------------------------------------------------------------------------


VIEWER = "viewer"  # the slot of a file opened in the file viewer


class EditForm(forms.Form):
    """One save of an inline editor, of the add-a-file form or of a delete button."""

    field = forms.ChoiceField(choices=[(f, f) for f in edits.EDIT_FIELDS])
    path = forms.CharField(required=False, max_length=500)
    content = forms.CharField(required=False, strip=False)
    upload = forms.FileField(required=False)
    base_revision = forms.IntegerField(min_value=1)
    action = forms.ChoiceField(choices=[("edit", "edit"), ("create", "create"), ("delete", "delete")], required=False)
    reason = forms.CharField(required=False, max_length=400)
    fixes = forms.TypedMultipleChoiceField(coerce=int, required=False)
    slot = forms.ChoiceField(choices=[("", "row"), (VIEWER, VIEWER)], required=False)

    def __init__(self, *args, issue_ids=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["fixes"].choices = [(pk, pk) for pk in issue_ids]

    def clean(self):
        data = super().clean()
        data["path"] = (data.get("path") or "").strip()
        data["action"] = data.get("action") or "edit"
        if data.get("upload") and not data["path"]:
            data["path"] = data["upload"].name
        if data.get("field") not in edits.FILE_FIELDS:
            data["path"] = ""
        elif not data["path"]:
            self.add_error("path", "Name the file.")
        return data

    @cached_property
    def content_value(self):
        """What to save: None deletes; an upload's bytes; typed text without the CRs browsers add to line ends."""
        data = self.cleaned_data
        if data["action"] == "delete":
            return None
        if data.get("upload"):
            return data["upload"].read()
        return data["content"].replace("\r\n", "\n")


# --- benchmarks ------------------------------------------------------------------------------------------------


MAX_TASK_IDS = 20_000


class BenchmarkForm(forms.Form):
    name = forms.SlugField(
        max_length=120, help_text="Letters, digits, '-' and '_': it names the benchmark in URLs, commands and exports."
    )
    description = forms.CharField(required=False, max_length=5000, widget=forms.Textarea(attrs={"rows": 3}))

    def clean_name(self):
        name = self.cleaned_data["name"]
        if Benchmark.objects.filter(name=name).exists():
            raise forms.ValidationError(f"There is already a benchmark called “{name}”.")
        return name


class FreezeForm(forms.Form):
    note = forms.CharField(
        required=False,
        max_length=500,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="What changed since the last version, or what this version is for.",
    )


class LazyToleranceForm(forms.Form):
    lazy_tolerance = forms.FloatField(
        min_value=0.0,
        max_value=1.0,
        label="Lazy-score tolerance",
        widget=forms.NumberInput(attrs={"step": "0.01", "min": "0", "max": "1"}),
        help_text="Accepting a candidate is blocked while a lazy agent earns more than this with its checker "
        "(0: any points for an empty, untouched or placeholder workspace block).",
    )


class ProposeForm(forms.Form):
    """Tasks to propose: by category and status, or a pasted list of task ids (which then wins)."""

    UNCATEGORIZED = "-"

    category = forms.ChoiceField(required=False)
    status = forms.ChoiceField(choices=[("", "Any status"), *Task.Status.choices], required=False)
    task_ids = forms.CharField(
        required=False,
        label="Or these task ids",
        max_length=1_000_000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One per line, or separated by spaces or commas; when given, category and status are not used.",
    )

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("initial", {"status": Task.Status.READY})
        super().__init__(*args, **kwargs)
        categories = list(BenchmarkCategory.objects.values_list("slug", "name"))
        self.fields["category"].choices = [("", "Any category"), *categories, (self.UNCATEGORIZED, "No category")]

    def clean_task_ids(self) -> list[str]:
        ids = list(dict.fromkeys(i for i in re.split(r"[\s,]+", self.cleaned_data["task_ids"]) if i))
        if len(ids) > MAX_TASK_IDS:
            raise forms.ValidationError(f"Paste at most {MAX_TASK_IDS:,} task ids at a time ({len(ids):,} given).")
        return ids

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        if data["task_ids"]:
            tasks = list(Task.objects.filter(external_id__in=data["task_ids"]))
            missing = sorted(set(data["task_ids"]) - {t.external_id for t in tasks})
            if missing:
                shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
                self.add_error("task_ids", f"No task with id {shown}.")
                return data
        else:
            tasks = Task.objects.all()
            if data["category"] == self.UNCATEGORIZED:
                tasks = tasks.filter(benchmark_category__isnull=True)
            elif data["category"]:
                tasks = tasks.filter(benchmark_category__slug=data["category"])
            if data["status"]:
                tasks = tasks.filter(status=data["status"])
            tasks = list(tasks.order_by("external_id"))
            if not tasks:
                raise forms.ValidationError("No task matches this category and status.")
        data["tasks"] = tasks
        return data


class ProposeTaskForm(forms.Form):
    benchmark = forms.ModelChoiceField(
        queryset=Benchmark.objects.order_by("name"), to_field_name="name", empty_label=None
    )


# --- difficulty filtering --------------------------------------------------------------------------------------


def agent_endpoints():
    """The enabled endpoints that serve the agent role, by name."""
    return ModelEndpoint.serving(ModelEndpoint.Role.AGENT)


class DifficultyFilterForm(forms.Form):
    """Start a difficulty filter: a strong and a small agent, n rollouts each per candidate, a harness."""

    strong = forms.ModelChoiceField(
        queryset=None,
        to_field_name="name",
        label="Strong agent",
        help_text="Should solve a kept candidate (mean at least the strong minimum).",
    )
    small = forms.ModelChoiceField(
        queryset=None,
        to_field_name="name",
        label="Small agent",
        help_text="Should mostly fail a kept candidate (mean at most the small maximum).",
    )
    n = forms.IntegerField(min_value=1, max_value=MAX_REPEATS, initial=4, label="Rollouts each (n)")
    harness = forms.ChoiceField(choices=HARNESS_CHOICES, required=False)

    def __init__(self, *args, last=None, **kwargs):
        """`last`: the previous DifficultyFilter, whose endpoints, n and harness are the defaults."""
        initial = {"n": 4, "harness": settings.CLAWGYM_DEFAULT_HARNESS}
        if last is not None:
            initial |= {
                "strong": last.strong_endpoint.name,
                "small": last.small_endpoint.name,
                "n": last.n,
                "harness": last.harness or initial["harness"],
            }
        kwargs["initial"] = initial | kwargs.get("initial", {})
        super().__init__(*args, **kwargs)
        self.fields["strong"].queryset = self.fields["small"].queryset = agent_endpoints()

    def clean(self):
        data = super().clean()
        if data.get("strong") and data.get("strong") == data.get("small"):
            self.add_error("small", "Choose another endpoint than the strong agent's.")
        return data

    def filter_settings(self) -> dict:
        data = self.cleaned_data
        return {"strong": data["strong"], "small": data["small"], "n": data["n"], "harness": data["harness"] or None}


class DifficultyThresholdsForm(forms.Form):
    """The benchmark's thresholds for its next difficulty filters."""

    strong_min = forms.FloatField(
        min_value=0.0,
        max_value=1.0,
        label="Strong agent at least",
        widget=forms.NumberInput(attrs={"step": "0.01", "min": "0", "max": "1"}),
        help_text="A candidate whose strong agent scores less (mean) is too hard.",
    )
    small_max = forms.FloatField(
        min_value=0.0,
        max_value=1.0,
        label="Small agent at most",
        widget=forms.NumberInput(attrs={"step": "0.01", "min": "0", "max": "1"}),
        help_text="A candidate whose small agent scores more (mean) is too easy.",
    )
    margin = forms.FloatField(
        min_value=0.0,
        max_value=1.0,
        label="Strong beats small by more than",
        widget=forms.NumberInput(attrs={"step": "0.01", "min": "0", "max": "1"}),
        help_text="Else the candidate does not tell the agents apart (0: strictly better).",
    )

    @classmethod
    def for_benchmark(cls, benchmark):
        return cls(
            initial={
                "strong_min": benchmark.difficulty_strong_min,
                "small_max": benchmark.difficulty_small_max,
                "margin": benchmark.difficulty_margin,
            }
        )


# --- the review team -------------------------------------------------------------------------------------------


class TeamForm(forms.Form):
    reviewers = forms.ModelMultipleChoiceField(
        queryset=get_user_model().objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Who the queue routes this benchmark's candidates to; none ticked: every reviewer.",
    )
    decisions_needed = forms.IntegerField(min_value=1, max_value=team.MAX_DECISIONS)
    overlap_share = forms.FloatField(
        min_value=0.0,
        max_value=1.0,
        help_text="Share of candidates that get one more independent decision, to measure agreement (0.2: 20%).",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        users = get_user_model().objects.filter(is_active=True).order_by("username")
        self.fields["reviewers"].queryset = users.filter(pk__in=[u.pk for u in users if has_role(u, REVIEWER)])


class AdjudicationForm(forms.Form):
    decision = forms.ChoiceField(choices=[("accept", "Accept"), ("reject", "Reject")])
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), help_text="The reviewers read it.")


# --- quality sampling ------------------------------------------------------------------------------------------


class SampleForm(forms.Form):
    """Draw a new sample: its name, N, an optional seed and the pool's filters."""

    name = forms.CharField(max_length=200)
    size = forms.IntegerField(label="Tasks (N)", min_value=1, max_value=quality.MAX_SAMPLE_SIZE, initial=50)
    seed = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=quality.MAX_SEED,
        help_text="Empty: a random one. It is kept, so the same seed over the same pool draws the same tasks.",
    )
    benchmark = forms.ModelChoiceField(
        Benchmark.objects.all(), required=False, to_field_name="name", empty_label="Any task (no benchmark)"
    )
    candidate_status = forms.ChoiceField(
        choices=[("", "Any candidate status"), *BenchmarkCandidate.Status.choices], required=False
    )
    task_status = forms.ChoiceField(choices=[("", "Any task status"), *Task.Status.choices], required=False)
    category = forms.ModelChoiceField(
        BenchmarkCategory.objects.all(), required=False, to_field_name="slug", empty_label="Any category"
    )
    source = forms.ChoiceField(choices=[("", "Any source"), *Task.Source.choices], required=False)

    def clean(self):
        data = super().clean()
        if data.get("candidate_status") and not data.get("benchmark"):
            self.add_error("candidate_status", "Pick the benchmark whose candidates to draw from.")
        return data

    def sample_fields(self):
        return [self[name] for name in ("name", "size", "seed")]

    def pool_fields(self):
        return [self[name] for name in quality.POOL_FILTERS]

    def pool(self) -> dict:
        """The filters that are set, by name (benchmark) and slug (category), as review.quality takes them."""
        data = self.cleaned_data
        pool = {key: data[key] for key in quality.POOL_FILTERS if data[key]}
        if "benchmark" in pool:
            pool["benchmark"] = pool["benchmark"].name
        if "category" in pool:
            pool["category"] = pool["category"].slug
        return pool


class RatingForm(forms.Form):
    """One score from 1 to 5 per quality dimension, and an optional comment."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for d in QUALITY_DIMENSIONS:
            self.fields[d.field] = forms.TypedChoiceField(
                label=d.label,
                help_text=d.help,
                choices=list(QUALITY_SCALE.items()),
                coerce=int,
                widget=forms.RadioSelect,
                error_messages={"required": f"Give {d.label.lower()} a score from 1 to 5."},
            )
        self.fields["comment"] = forms.CharField(
            required=False,
            max_length=quality.MAX_COMMENT,
            widget=forms.Textarea(attrs={"rows": 3}),
            help_text="Optional: what made you give these scores.",
        )

    def dimension_fields(self):
        return [self[d.field] for d in QUALITY_DIMENSIONS]

    def scores(self) -> dict[str, int]:
        return {d.field: self.cleaned_data[d.field] for d in QUALITY_DIMENSIONS}


# --- diagnosis measures: planted flaws -------------------------------------------------------------------------


class PlantForm(forms.Form):
    kinds = forms.MultipleChoiceField(
        choices=PlantedFlaw.Kind.choices,
        widget=forms.CheckboxSelectMultiple,
        label="Flaw kinds",
        help_text="Planted in turn: with two kinds and 4 flaws, two of each.",
    )
    count = forms.IntegerField(
        min_value=1,
        max_value=planting.MAX_PLANTS,
        initial=4,
        label="How many",
        help_text="Each goes into a new copy of an accepted candidate, proposed to this benchmark unmarked.",
    )
    seed = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=2**63 - 1,
        label="Seed (optional)",
        help_text="The same seed over the same accepted candidates plants the same flaws.",
    )
