"""Model endpoints and model calls as the API shows them. An endpoint's key never appears: only its variable's name."""

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers

from .forms import CallFilterForm
from .models import ModelCall, ModelEndpoint
from .services import create_endpoint, update_endpoint


class ModelEndpointSerializer(serializers.ModelSerializer):
    roles = serializers.ListField(child=serializers.ChoiceField(ModelEndpoint.Role.choices), required=False)
    key_is_set = serializers.SerializerMethodField(help_text="Whether the named environment variable is set here.")

    class Meta:
        model = ModelEndpoint
        fields = [
            "name", "base_url", "model", "api_style", "api_key_env", "key_is_set", "roles", "timeout_seconds",
            "max_retries", "max_concurrent", "sampling", "price_input_per_mtok", "price_output_per_mtok", "enabled",
            "created_at", "updated_at",
        ]
        read_only_fields = ["created_at", "updated_at"]

    def get_key_is_set(self, endpoint) -> bool | None:
        state = endpoint.key_state()
        return None if state == "none needed" else state == "set"  # a variable that may not be used is never read

    def validate_name(self, value):
        if self.instance is not None and value != self.instance.name:
            raise serializers.ValidationError("an endpoint's name does not change once made")
        return value

    def _save(self, save):
        try:
            return save()
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from None

    def create(self, validated_data):
        user = self.context["request"].user
        name = validated_data.pop("name")
        return self._save(lambda: create_endpoint(name, user=user, **validated_data))

    def update(self, instance, validated_data):
        validated_data.pop("name", None)
        user = self.context["request"].user
        return self._save(lambda: update_endpoint(instance, user=user, **validated_data))


class ModelCallListSerializer(serializers.ModelSerializer):
    # The session's id: its token is a bearer credential of a live agent, never serialised.
    session = serializers.PrimaryKeyRelatedField(read_only=True)
    ok = serializers.BooleanField(read_only=True)

    class Meta:
        model = ModelCall
        fields = [
            "id", "endpoint_name", "model", "purpose", "subject", "served_type", "served_id", "session", "api",
            "stream", "status_code", "ok", "error", "attempts", "input_tokens", "output_tokens", "latency_ms",
            "ttft_ms", "cost", "sampling_changes", "created_at",
        ]
        read_only_fields = fields


class ModelCallSerializer(ModelCallListSerializer):
    """One call in full: the request as sent and the (assembled) response."""

    class Meta(ModelCallListSerializer.Meta):
        fields = ModelCallListSerializer.Meta.fields + ["request", "response"]
        read_only_fields = fields


class ModelCallFilterSerializer(serializers.Serializer):
    purpose = serializers.CharField(required=False)
    endpoint = serializers.CharField(required=False)
    subject = serializers.CharField(required=False, help_text="contains")
    session = serializers.IntegerField(required=False, min_value=1, help_text="a proxy session's id")
    outcome = serializers.ChoiceField(["ok", "error"], required=False)

    def filter(self, queryset):
        return CallFilterForm(self.validated_data).filter(queryset)
