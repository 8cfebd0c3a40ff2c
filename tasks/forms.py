from django import forms
from django.db.models import Q

from .formats import FORMATS
from .models import BenchmarkCategory, SanityReport, Task

AUTO_FORMAT = "auto"
IMPORT_SUFFIXES = (".zip", ".tar.gz", ".tgz", ".jsonl")


class TaskFilterForm(forms.Form):
    """The task list's filters. Invalid values are ignored rather than failing the page."""

    UNCATEGORIZED = "-"

    q = forms.CharField(required=False, max_length=200, label="Search")
    category = forms.ChoiceField(required=False)
    status = forms.ChoiceField(choices=[("", "All statuses"), *Task.Status.choices], required=False)
    source = forms.ChoiceField(choices=[("", "All sources"), *Task.Source.choices], required=False)
    # By the latest sanity report of each task's current revision.
    sanity = forms.ChoiceField(choices=[("", "Any sanity"), *SanityReport.FILTERS.items()], required=False)
    # What a lazy agent earns (the latest report's lazy score), above one of the thresholds.
    lazy = forms.ChoiceField(
        choices=[("", "Any"), *((f"{t:g}", f"Lazy agent earns > {t:g}") for t in SanityReport.LAZY_THRESHOLDS)],
        required=False,
        label="Lazy score",
    )
    sort = forms.ChoiceField(
        choices=[("updated", "Recently updated"), ("lazy", "Lazy score, highest first")], required=False
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._category_ids = {}
        choices = [("", "All categories")]
        for pk, slug, name in BenchmarkCategory.objects.values_list("pk", "slug", "name"):
            self._category_ids[slug] = pk
            choices.append((slug, name))
        choices.append((self.UNCATEGORIZED, "No category"))
        self.fields["category"].choices = choices

    def filter(self, queryset):
        self.is_valid()  # cleaned_data then holds the valid fields only: a bad value drops just its filter
        data = self.cleaned_data
        category = data.get("category")
        if category == self.UNCATEGORIZED:
            queryset = queryset.filter(benchmark_category__isnull=True)
        elif category:
            # By id: no join with the category table in the filter or the count.
            queryset = queryset.filter(benchmark_category_id=self._category_ids[category])
        if data.get("status"):
            queryset = queryset.filter(status=data["status"])
        if data.get("source"):
            queryset = queryset.filter(source=data["source"])
        if data.get("sanity"):
            queryset = SanityReport.filter_tasks(queryset, data["sanity"])
        if data.get("lazy"):
            queryset = SanityReport.filter_lazy_above(queryset, float(data["lazy"]))
        q = data.get("q", "").strip()
        if q:
            queryset = queryset.filter(Q(external_id__icontains=q) | Q(title__icontains=q))
        return queryset


class CompareForm(forms.Form):
    """Two revision numbers of one task."""

    a = forms.TypedChoiceField(coerce=int, label="From")
    b = forms.TypedChoiceField(coerce=int, label="To")

    def __init__(self, *args, numbers: list[int], **kwargs):
        super().__init__(*args, **kwargs)
        choices = [(n, f"r{n}") for n in numbers]
        self.fields["a"].choices = choices
        self.fields["b"].choices = choices

    def clean(self):
        data = super().clean()
        if data.get("a") is not None and data.get("a") == data.get("b"):
            raise forms.ValidationError("Pick two different revisions.")
        return data


class ImportForm(forms.Form):
    archive = forms.FileField(
        label="Archive or JSONL file",
        help_text="A .zip or .tar.gz of task folders, or a .jsonl file with one task a line.",
    )
    format = forms.ChoiceField(
        choices=[(AUTO_FORMAT, "Detect automatically"), *((name, f.label) for name, f in FORMATS.items())],
        initial=AUTO_FORMAT,
    )

    def clean_archive(self):
        upload = self.cleaned_data["archive"]
        if not upload.name.lower().endswith(IMPORT_SUFFIXES):
            raise forms.ValidationError(f"“{upload.name}” is not a .zip, .tar.gz or .jsonl file.")
        return upload

    def clean_format(self):
        """The format name for tasks.importing, None for detection."""
        value = self.cleaned_data["format"]
        return None if value == AUTO_FORMAT else value
