"""The seeds of the two routes as the API shows and takes them: personas (and their import) and skills (their
annotation and its override)."""

from django.db.models import Q
from rest_framework import serializers

from ..annotation import skill_synthesizable
from ..models import Persona, Skill, SkillAnnotation


class PersonaSerializer(serializers.ModelSerializer):
    class Meta:
        model = Persona
        fields = ["id", "text", "source", "enabled", "created_at"]
        read_only_fields = fields


class PersonaFilterSerializer(serializers.Serializer):
    q = serializers.CharField(required=False, help_text="Text contained (case-insensitive).")
    enabled = serializers.BooleanField(required=False, allow_null=True, default=None)

    def filter(self, queryset):
        data = self.validated_data
        if data.get("q"):
            queryset = queryset.filter(text__icontains=data["q"])
        if data.get("enabled") is not None:
            queryset = queryset.filter(enabled=data["enabled"])
        return queryset


class PersonaImportSerializer(serializers.Serializer):
    file = serializers.FileField(help_text='Persona Hub JSONL ({"persona": "…"} per line) or plain text (multipart).')


class ImportFailureSerializer(serializers.Serializer):
    source = serializers.CharField()
    error = serializers.CharField()


class ImportReportSerializer(serializers.Serializer):
    """The `import_personas --json` / `import_skills --json` shape."""

    imported = serializers.IntegerField()
    updated = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    failed = ImportFailureSerializer(many=True, help_text="The first 100 failures, each naming its line or folder.")
    failed_count = serializers.IntegerField(help_text="All the failures, also those not listed in `failed`.")


class SkillAnnotationSerializer(serializers.ModelSerializer):
    class Meta:
        model = SkillAnnotation
        fields = [
            "id",
            "summary",
            "core_content",
            "auth_required",
            "required_env",
            "input_format",
            "output_format",
            "text_only_compatible",
            "risk",
            "risk_reason",
            "missing_bins",
            "synthesizable",
            "endpoint_name",
            "prompt_version",
            "model_call",
            "created_at",
        ]
        read_only_fields = fields


class SkillSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="synthesis-skill-detail", lookup_field="name")
    synthesizable = serializers.SerializerMethodField()
    annotation = serializers.SerializerMethodField()
    override_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = Skill
        fields = [
            "id",
            "url",
            "name",
            "description",
            "source",
            "required_bins",
            "required_env",
            "primary_env",
            "synthesizable",
            "synthesizable_override",
            "override_reason",
            "override_by",
            "annotation",
            "annotation_error",
            "skipped_files",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def _latest(self, skill):
        found = list(skill.annotations.all())  # prefetched newest first (api.SkillViewSet)
        return found[0] if found else None

    def get_synthesizable(self, skill) -> bool:
        """The admin's override when set, else the latest annotation's label (false while there is none)."""
        return skill_synthesizable(skill)

    def get_annotation(self, skill) -> SkillAnnotationSerializer(allow_null=True):
        latest = self._latest(skill)
        return SkillAnnotationSerializer(latest).data if latest else None


class SkillFilterSerializer(serializers.Serializer):
    q = serializers.CharField(required=False, help_text="Name or description contained.")
    annotated = serializers.BooleanField(required=False, allow_null=True, default=None)

    def filter(self, queryset):
        data = self.validated_data
        if data.get("q"):
            queryset = queryset.filter(Q(name__icontains=data["q"]) | Q(description__icontains=data["q"]))
        if data.get("annotated") is not None:
            queryset = queryset.filter(annotations__isnull=not data["annotated"]).distinct()
        return queryset


class SkillOverrideSerializer(serializers.Serializer):
    synthesizable = serializers.BooleanField(
        allow_null=True, help_text="true / false override the annotation's label; null clears."
    )
    reason = serializers.CharField(
        required=False, allow_blank=True, max_length=2000, help_text="Required to set a label."
    )

    def validate(self, attrs):
        if attrs["synthesizable"] is not None and not (attrs.get("reason") or "").strip():
            raise serializers.ValidationError({"reason": ["say why the label is overridden"]})
        return attrs


class AnnotateSerializer(serializers.Serializer):
    skills = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        allow_empty=False,
        help_text="Skill names; every skill when left out.",
    )
    endpoint = serializers.CharField(required=False, help_text="Default: the first enabled judge, else generator.")

    def validate_skills(self, names):
        found = dict(Skill.objects.filter(name__in=names).values_list("name", "pk"))
        unknown = [name for name in names if name not in found]
        if unknown:
            raise serializers.ValidationError(f"no skill named {', '.join(unknown[:20])}")
        return [found[name] for name in dict.fromkeys(names)]
