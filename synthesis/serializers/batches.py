"""Synthesis batches and their items as the API shows and takes them. The figures come from synthesis.batch_report
(batch_json, funnel, report); the input serializers validate a request and resolve endpoint names to rows."""

from rest_framework import serializers

from lib.bounds import MAX_ID
from llm.models import ModelEndpoint

from ..batch_plan import MAX_COUNT, MAX_SUPPORTING
from ..batch_report import batch_json, funnel
from ..models import QAStage, Route, Stage, SynthesisBatch, SynthesisItem


def _when(moment) -> str | None:
    return serializers.DateTimeField().to_representation(moment) if moment else None


class EndpointNameField(serializers.CharField):
    """An endpoint's name in, the row out. With `role`, only what the start form offers for it
    (ModelEndpoint.serving): an enabled endpoint that serves the role; anything else is refused, saying why."""

    def __init__(self, *, role: str | None = None, **kwargs):
        self.role = role
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        name = super().to_internal_value(data)
        endpoint = ModelEndpoint.objects.filter(name=name).first()
        if endpoint is None:
            raise serializers.ValidationError(f"no model endpoint named {name!r}")
        if self.role and not endpoint.enabled:
            raise serializers.ValidationError(
                f"model endpoint {name!r} is disabled: enable it on the Models page (/llm/endpoints/)"
            )
        if self.role and not endpoint.serves(self.role):
            raise serializers.ValidationError(
                f"model endpoint {name!r} does not serve the {self.role} role: give it that role on the Models page "
                "(/llm/endpoints/)"
            )
        return endpoint


# --- batches -----------------------------------------------------------------------------------------------------


class BatchOptionsSerializer(serializers.Serializer):
    operations = serializers.IntegerField(
        required=False, min_value=1, max_value=8, help_text="Persona route: operations per task (default 3)."
    )
    supporting = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_SUPPORTING,
        help_text="Skill route: supporting skills at most (default 3).",
    )
    allow_network = serializers.BooleanField(
        required=False, help_text="Draw operations that need the network (the sandbox has none)."
    )

    def to_internal_value(self, data):
        unknown = sorted(set(data) - set(self.fields)) if isinstance(data, dict) else []
        if unknown:
            raise serializers.ValidationError(
                f"unknown option(s) {', '.join(unknown)}; known: {', '.join(self.fields)}"
            )
        return super().to_internal_value(data)


class StartBatchSerializer(serializers.Serializer):
    """What synthesis.services.start_batch takes (the `synthesize` command's flags)."""

    route = serializers.ChoiceField(choices=Route.choices)
    count = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_COUNT, help_text="Tasks wanted; not needed for a preview (5)."
    )
    generator = EndpointNameField(
        role=ModelEndpoint.Role.GENERATOR, help_text="The generator endpoint's name (enabled, with the generator role)."
    )
    judge = EndpointNameField(
        role=ModelEndpoint.Role.JUDGE, help_text="The judge endpoint's name (enabled, with the judge role)."
    )
    seed = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=MAX_ID,
        help_text="Draws the items (default: a random one).",
    )
    preview = serializers.BooleanField(default=False, help_text="5 items through every stage.")
    budget_usd = serializers.DecimalField(required=False, allow_null=True, max_digits=12, decimal_places=4, min_value=0)
    budget_tokens = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=MAX_ID)
    qa_stages = serializers.ListField(
        child=serializers.ChoiceField(choices=QAStage.choices),
        required=False,
        help_text="The QA stages to run (default every one; [] none).",
    )
    options = BatchOptionsSerializer(required=False)
    name = serializers.CharField(required=False, allow_blank=True, max_length=200)

    def validate(self, attrs):
        if "count" not in attrs and not attrs["preview"]:
            raise serializers.ValidationError({"count": ["give the number of tasks wanted (or preview: true)"]})
        return attrs

    def batch_settings(self) -> dict:
        data = self.validated_data
        options = dict(data.get("options") or {})
        if "qa_stages" in data:
            options["qa_stages"] = list(data["qa_stages"])
        return {
            "route": data["route"],
            "count": data.get("count", 0),
            "generator": data["generator"],
            "judge": data["judge"],
            "seed": data.get("seed"),
            "preview": data["preview"],
            "budget_usd": data.get("budget_usd"),
            "budget_tokens": data.get("budget_tokens"),
            "options": options,
            "name": data.get("name", ""),
        }


class ResumeBatchSerializer(serializers.Serializer):
    budget_usd = serializers.DecimalField(
        required=False,
        allow_null=True,
        max_digits=12,
        decimal_places=4,
        min_value=0,
        help_text="A new cost budget (null: none); left out, the batch's own.",
    )
    budget_tokens = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=MAX_ID)


class BatchFilterSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=SynthesisBatch.Status.choices, required=False)
    route = serializers.ChoiceField(choices=Route.choices, required=False)
    preview = serializers.BooleanField(required=False, allow_null=True, default=None)

    def filter(self, queryset):
        data = self.validated_data
        for name in ("status", "route", "preview"):
            if data.get(name) is not None:
                queryset = queryset.filter(**{name: data[name]})
        return queryset


class BatchProgressSerializer(serializers.Serializer):
    finished = serializers.IntegerField()
    requested = serializers.IntegerField()
    stages = serializers.DictField(
        child=serializers.DictField(child=serializers.IntegerField()), help_text="stage -> status -> items"
    )


class SynthesisBatchListSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="synthesis-batch-detail")
    generator = serializers.CharField(source="generator.name", read_only=True)
    judge = serializers.CharField(source="judge.name", read_only=True)
    tokens = serializers.SerializerMethodField()
    cost = serializers.FloatField()
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    finished = serializers.IntegerField(read_only=True, help_text="Items kept, rejected or failed.")
    kept = serializers.IntegerField(read_only=True)
    rejected = serializers.IntegerField(read_only=True, help_text="Items rejected (any stage).")
    failed = serializers.IntegerField(read_only=True, help_text="Items failed (any stage).")

    class Meta:
        model = SynthesisBatch
        fields = [
            "id",
            "url",
            "name",
            "route",
            "status",
            "status_reason",
            "preview",
            "requested",
            "finished",
            "kept",
            "rejected",
            "failed",
            "generator",
            "judge",
            "seed",
            "tokens",
            "cost",
            "created_at",
            "created_by",
            "finished_at",
        ]
        read_only_fields = fields

    def get_tokens(self, batch) -> int:
        return batch.input_tokens + batch.output_tokens


class FunnelReasonSerializer(serializers.Serializer):
    reason = serializers.CharField()
    status = serializers.ChoiceField(choices=SynthesisItem.Status.choices)
    count = serializers.IntegerField()
    examples = serializers.ListField(child=serializers.IntegerField(), help_text="Item ids.")


class FunnelStepSerializer(serializers.Serializer):
    step = serializers.CharField()
    label = serializers.CharField()
    count = serializers.IntegerField(help_text="Items that passed this step.")
    rejected = serializers.IntegerField()
    failed = serializers.IntegerField()
    in_progress = serializers.IntegerField()
    reasons = FunnelReasonSerializer(many=True)


class SynthesisBatchDetailSerializer(serializers.Serializer):
    """The `synthesize --json` shape (batch_report.batch_json), the funnel and the settings the batch was started with."""

    batch = serializers.IntegerField()
    status = serializers.ChoiceField(choices=SynthesisBatch.Status.choices)
    requested = serializers.IntegerField()
    kept = serializers.IntegerField()
    rejected = serializers.DictField(child=serializers.IntegerField(), help_text="stage -> items rejected there")
    failed = serializers.DictField(child=serializers.IntegerField(), help_text="stage -> items failed there")
    tokens = serializers.IntegerField()
    cost = serializers.FloatField()
    funnel = FunnelStepSerializer(many=True)
    name = serializers.CharField()
    route = serializers.ChoiceField(choices=Route.choices)
    preview = serializers.BooleanField()
    generator = serializers.CharField()
    judge = serializers.CharField()
    seed = serializers.IntegerField()
    options = serializers.DictField()
    qa_thresholds = serializers.DictField()
    prompt_versions = serializers.DictField(child=serializers.CharField())
    budget_usd = serializers.FloatField(allow_null=True)
    budget_tokens = serializers.IntegerField(allow_null=True)
    status_reason = serializers.CharField()
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    config = serializers.DictField(help_text="The normalised configuration; a resume with another one is refused.")
    created_by = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)

    def to_representation(self, batch):
        return {
            **batch_json(batch),
            "funnel": funnel(batch),
            "name": batch.name,
            "route": batch.route,
            "preview": batch.preview,
            "generator": batch.generator.name,
            "judge": batch.judge.name,
            "seed": batch.seed,
            "options": batch.options,
            "qa_thresholds": batch.qa_thresholds,
            "prompt_versions": batch.prompt_versions,
            "budget_usd": float(batch.budget_usd) if batch.budget_usd is not None else None,
            "budget_tokens": batch.budget_tokens,
            "status_reason": batch.status_reason,
            "input_tokens": batch.input_tokens,
            "output_tokens": batch.output_tokens,
            "config": batch.config,
            "created_by": batch.created_by.get_username() if batch.created_by_id else None,
            "created_at": _when(batch.created_at),
            "started_at": _when(batch.started_at),
            "finished_at": _when(batch.finished_at),
        }


class StartedBatchSerializer(SynthesisBatchDetailSerializer):
    resumed = serializers.BooleanField(help_text="An earlier batch of the same configuration goes on instead.")


class BatchReportSerializer(serializers.Serializer):
    """The `synthesis_report --json` shape (batch_report.report)."""

    batch = serializers.IntegerField()
    status = serializers.ChoiceField(choices=SynthesisBatch.Status.choices)
    requested = serializers.IntegerField()
    kept = serializers.IntegerField()
    rejected = serializers.DictField(child=serializers.IntegerField())
    failed = serializers.DictField(child=serializers.IntegerField())
    tokens = serializers.IntegerField()
    cost = serializers.FloatField()
    funnel = FunnelStepSerializer(many=True)
    stages = serializers.DictField(child=serializers.DictField(), help_text="purpose -> calls, tokens, cost")
    distributions = serializers.DictField(
        child=serializers.DictField(), help_text="all / kept -> subcategories, operations, skills, difficulty"
    )
    progress = BatchProgressSerializer()
    status_reason = serializers.CharField()


# --- items -------------------------------------------------------------------------------------------------------


class ItemFilterSerializer(serializers.Serializer):
    batch = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID, help_text="The batch's id.")
    status = serializers.ChoiceField(choices=SynthesisItem.Status.choices, required=False)
    stage = serializers.ChoiceField(
        choices=Stage.choices, required=False, help_text="The stage it reached (or ended at)."
    )

    def filter(self, queryset):
        for name in ("batch", "status", "stage"):
            if name in self.validated_data:
                queryset = queryset.filter(**{name if name != "batch" else "batch_id": self.validated_data[name]})
        return queryset


class SynthesisItemSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="synthesis-item-detail")
    batch = serializers.IntegerField(source="batch_id", read_only=True)
    rejected_at = serializers.SerializerMethodField()
    task = serializers.SlugRelatedField(slug_field="external_id", read_only=True)
    tokens = serializers.SerializerMethodField()
    cost = serializers.FloatField()

    class Meta:
        model = SynthesisItem
        fields = [
            "id",
            "url",
            "batch",
            "index",
            "status",
            "stage",
            "rejected_at",
            "reason",
            "seed",
            "task",
            "tokens",
            "cost",
            "attempts",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def get_rejected_at(self, item) -> str | None:
        """The stage that rejected it ("qa:novelty" for a QA stage); null unless rejected."""
        if item.status != SynthesisItem.Status.REJECTED:
            return None
        return (item.stage_results.get(item.stage) or {}).get("rejected_at") or item.stage

    def get_tokens(self, item) -> int:
        return item.input_tokens + item.output_tokens


class SynthesisItemDetailSerializer(SynthesisItemSerializer):
    class Meta(SynthesisItemSerializer.Meta):
        fields = [*SynthesisItemSerializer.Meta.fields, "stage_results", "draft"]
        read_only_fields = fields
