"""Django admin for synthesis seeds. Personas and operations are editable data; skills are imported (their files
and annotations are shown, never edited here), and an admin may override a skill's synthesizable label, with a
reason, through synthesis.services.set_override."""

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.template.response import TemplateResponse
from django.utils.html import format_html

from .annotation import skill_synthesizable
from .models import AtomicOperation, OperationCategory, Persona, Skill, SkillAnnotation, SkillFile
from .seed_files import persona_hash
from .services import set_override

MAX_SHOWN_CHARS = 20_000  # of one skill file on its skill's page


class ReadOnlyAdminMixin:
    """Viewing only: no add, change or delete, for anyone (superusers included)."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


# --- personas and operations -----------------------------------------------------------------------------------


class PersonaForm(forms.ModelForm):
    class Meta:
        model = Persona
        fields = ["text", "source", "enabled"]

    def clean_text(self):
        text = " ".join(self.cleaned_data["text"].split())
        same = Persona.objects.filter(text_hash=persona_hash(text)).exclude(pk=self.instance.pk)
        if same.exists():
            raise forms.ValidationError(f"this persona is there already (#{same.first().pk})")
        return text


@admin.register(Persona)
class PersonaAdmin(admin.ModelAdmin):
    form = PersonaForm
    list_display = ["short_text", "source", "enabled", "created_at"]
    list_filter = ["enabled", "source"]
    search_fields = ["text"]
    list_editable = ["enabled"]
    fields = ["text", "source", "enabled", "text_hash", "created_at"]
    readonly_fields = ["text_hash", "created_at"]
    actions = ["enable", "disable"]
    list_per_page = 100

    @admin.display(description="persona")
    def short_text(self, obj):
        return obj.text if len(obj.text) <= 120 else obj.text[:119] + "…"

    def save_model(self, request, obj, form, change):
        obj.text_hash = persona_hash(obj.text)  # an edited text is another persona: keep the key in step
        super().save_model(request, obj, form, change)

    @admin.action(description="Enable the selected personas")
    def enable(self, request, queryset):
        self.message_user(request, f"enabled {queryset.update(enabled=True)} persona(s)")

    @admin.action(description="Disable the selected personas (left out of new batches)")
    def disable(self, request, queryset):
        self.message_user(request, f"disabled {queryset.update(enabled=False)} persona(s)")


class AtomicOperationInline(admin.TabularInline):
    model = AtomicOperation
    fields = ["slug", "name", "description", "needs_network", "enabled"]
    extra = 0


@admin.register(OperationCategory)
class OperationCategoryAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "order", "operation_count"]
    list_editable = ["order"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [AtomicOperationInline]

    @admin.display(description="operations")
    def operation_count(self, obj):
        return obj.operations.count()


@admin.register(AtomicOperation)
class AtomicOperationAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "category", "needs_network", "enabled"]
    list_filter = ["category", "needs_network", "enabled"]
    list_editable = ["needs_network", "enabled"]
    search_fields = ["name", "slug", "description"]
    list_select_related = ["category"]
    prepopulated_fields = {"slug": ["name"]}


# --- skills ---------------------------------------------------------------------------------------------------------


class SkillFileInline(ReadOnlyAdminMixin, admin.StackedInline):
    model = SkillFile
    fields = ["path", "size", "content"]
    readonly_fields = fields
    extra = 0

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("blob")

    @admin.display(description="bytes")
    def size(self, obj):
        return obj.blob.size

    @admin.display(description="content")
    def content(self, obj):
        text = obj.blob.content.decode("utf-8", errors="replace")
        cut = len(text) > MAX_SHOWN_CHARS
        return format_html(
            '<pre style="white-space: pre-wrap; max-height: 30em; overflow: auto">{}{}</pre>',
            text[:MAX_SHOWN_CHARS],
            f"\n[… cut: {len(text):,} characters]" if cut else "",
        )


class SkillAnnotationInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = SkillAnnotation
    fields = [
        "created_at",
        "synthesizable",
        "auth_required",
        "text_only_compatible",
        "missing_bins",
        "risk",
        "endpoint_name",
        "summary",
    ]
    readonly_fields = fields
    extra = 0
    show_change_link = True


class OverrideChoice:
    FOLLOW, YES, NO = "", "yes", "no"
    CHOICES = [(FOLLOW, "follow the annotation"), (YES, "synthesizable"), (NO, "not synthesizable")]
    VALUES = {FOLLOW: None, YES: True, NO: False}


class SkillOverrideForm(forms.ModelForm):
    """The only thing an admin changes on a skill: the override of its label, with a reason."""

    override = forms.ChoiceField(choices=OverrideChoice.CHOICES, required=False, label="Synthesizable override")

    class Meta:
        model = Skill
        fields = ["override_reason"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        current = self.instance.synthesizable_override
        self.fields["override"].initial = {None: "", True: "yes", False: "no"}[current]
        self.fields["override_reason"].help_text = "Required when the label is overridden."

    def clean(self):
        data = super().clean()
        value = OverrideChoice.VALUES[data.get("override") or ""]
        if value is not None and not (data.get("override_reason") or "").strip():
            self.add_error("override_reason", "say why the label is overridden")
        data["override_value"] = value
        return data


class OverrideLabelForm(forms.Form):
    label = forms.ChoiceField(
        choices=[(OverrideChoice.YES, "synthesizable"), (OverrideChoice.NO, "not synthesizable")],
        widget=forms.RadioSelect,
    )
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), help_text="Why the label is overridden.")


@admin.register(Skill)
class SkillAdmin(admin.ModelAdmin):
    form = SkillOverrideForm
    list_display = [
        "name",
        "source",
        "required_bins",
        "annotated_label",
        "synthesizable_override",
        "effective",
        "updated_at",
    ]
    list_filter = ["source", "synthesizable_override"]
    search_fields = ["name", "description"]
    readonly_fields = [
        "name",
        "description",
        "source",
        "required_bins",
        "required_env",
        "primary_env",
        "front_matter",
        "skipped_files",
        "content_hash",
        "annotation_error",
        "override_by",
        "effective",
        "created_at",
        "updated_at",
    ]
    fieldsets = [
        (None, {"fields": ["name", "description", "source", "required_bins", "required_env", "primary_env"]}),
        ("Label", {"fields": ["effective", "override", "override_reason", "override_by", "annotation_error"]}),
        ("Import", {"fields": ["front_matter", "skipped_files", "content_hash", "created_at", "updated_at"]}),
    ]
    inlines = [SkillAnnotationInline, SkillFileInline]
    actions = ["override_label", "clear_override"]

    def has_add_permission(self, request):
        return False  # skills come in by import (manage.py import_skills)

    @admin.display(description="annotation says", boolean=True)
    def annotated_label(self, obj):
        latest = obj.latest_annotation()
        return None if latest is None else latest.synthesizable

    @admin.display(description="synthesizable", boolean=True)
    def effective(self, obj):
        return skill_synthesizable(obj)

    def save_model(self, request, obj, form, change):
        set_override(
            obj,
            form.cleaned_data["override_value"],
            reason=form.cleaned_data.get("override_reason", ""),
            user=request.user,
        )

    @admin.action(description="Override the label of the selected skills (with a reason)…")
    def override_label(self, request, queryset):
        """Two steps: the first shows the form; its submission ("apply") sets the override on each skill."""
        form = OverrideLabelForm(request.POST if "apply" in request.POST else None)
        if form.is_bound and form.is_valid():
            value = OverrideChoice.VALUES[form.cleaned_data["label"]]
            for skill in queryset:
                set_override(skill, value, reason=form.cleaned_data["reason"], user=request.user)
            label = "synthesizable" if value else "not synthesizable"
            self.message_user(request, f"{queryset.count()} skill(s) marked {label}", messages.SUCCESS)
            return None
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Override the label",
            "form": form,
            "skills": queryset,
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/synthesis/skill/override_label.html", context)

    @admin.action(description="Clear the override (follow the annotation)")
    def clear_override(self, request, queryset):
        for skill in queryset:
            set_override(skill, None, reason="", user=request.user)
        self.message_user(request, f"cleared the override of {queryset.count()} skill(s)", messages.SUCCESS)


@admin.register(SkillAnnotation)
class SkillAnnotationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "skill",
        "created_at",
        "synthesizable",
        "auth_required",
        "text_only_compatible",
        "risk",
        "missing_bins",
        "endpoint_name",
    ]
    list_filter = ["synthesizable", "auth_required", "text_only_compatible", "risk", "endpoint_name"]
    search_fields = ["skill__name", "summary"]
    list_select_related = ["skill"]
