"""Model endpoints and model calls as the API shows them. An endpoint's key never appears: only its variable's name."""

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.reverse import reverse

from lib.bounds import MAX_ID

from .bodies import MAX_RANGE, body_of
from .forms import CallFilterForm
from .models import ModelCall, ModelEndpoint
from .services import create_endpoint, update_endpoint


class ModelEndpointSerializer(serializers.ModelSerializer):
    roles = serializers.ListField(child=serializers.ChoiceField(ModelEndpoint.Role.choices), required=False)
    key_is_set = serializers.SerializerMethodField(help_text="Whether the named environment variable is set here.")

    class Meta:
        model = ModelEndpoint
        fields = [
            "name",
            "base_url",
            "model",
            "api_style",
            "api_key_env",
            "key_is_set",
            "roles",
            "timeout_seconds",
            "max_retries",
            "max_concurrent",
            "sampling",
            "price_input_per_mtok",
            "price_output_per_mtok",
            "enabled",
            "created_at",
            "updated_at",
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
            "id",
            "endpoint_name",
            "model",
            "purpose",
            "subject",
            "served_type",
            "served_id",
            "session",
            "api",
            "stream",
            "status_code",
            "ok",
            "error",
            "answer_state",
            "attempts",
            "input_tokens",
            "output_tokens",
            "latency_ms",
            "ttft_ms",
            "cost",
            "sampling_changes",
            "created_at",
        ]
        read_only_fields = fields


BODY = "the body itself when its JSON text is at most CLAWGYM_MODEL_CALL_INLINE_BYTES characters, else null"
BODY_LENGTH = "characters of its JSON text (null: none)"
BODY_HEAD = "its first CLAWGYM_MODEL_CALL_INLINE_BYTES characters of JSON text when it is longer, else null"
BODY_URL = "where the whole body is (streamed), or ?offset=&length= a range of it; null: none"


class ModelCallSerializer(ModelCallListSerializer):
    """One call: the request as sent and the (assembled) response, each whole when small, else its head and where
    the rest is (llm.bodies; the instance comes from with_heads, its bodies never loaded whole)."""

    request = serializers.SerializerMethodField(help_text=BODY)
    response = serializers.SerializerMethodField(help_text=BODY)
    request_length = serializers.SerializerMethodField(help_text=BODY_LENGTH)
    response_length = serializers.SerializerMethodField(help_text=BODY_LENGTH)
    request_head = serializers.SerializerMethodField(help_text=BODY_HEAD)
    response_head = serializers.SerializerMethodField(help_text=BODY_HEAD)
    request_url = serializers.SerializerMethodField(help_text=BODY_URL)
    response_url = serializers.SerializerMethodField(help_text=BODY_URL)

    class Meta(ModelCallListSerializer.Meta):
        fields = ModelCallListSerializer.Meta.fields + [
            "request",
            "response",
            "request_length",
            "response_length",
            "request_head",
            "response_head",
            "request_url",
            "response_url",
        ]
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_request(self, call):
        return body_of(call, "request").value

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_response(self, call):
        return body_of(call, "response").value

    def get_request_length(self, call) -> int | None:
        return body_of(call, "request").length

    def get_response_length(self, call) -> int | None:
        return body_of(call, "response").length

    def _head(self, call, part: str) -> str | None:
        body = body_of(call, part)
        return None if body.inline or body.length is None else body.head

    def get_request_head(self, call) -> str | None:
        return self._head(call, "request")

    def get_response_head(self, call) -> str | None:
        return self._head(call, "response")

    def _url(self, call, part: str) -> str | None:
        if body_of(call, part).length is None:
            return None
        return reverse("modelcall-body", kwargs={"pk": call.pk, "part": part}, request=self.context.get("request"))

    def get_request_url(self, call) -> str | None:
        return self._url(call, "request")

    def get_response_url(self, call) -> str | None:
        return self._url(call, "response")


class BodyRangeSerializer(serializers.Serializer):
    """One range of a call's request or response (its JSON text), and where the next one begins."""

    part = serializers.ChoiceField(["request", "response"])
    offset = serializers.IntegerField()
    total = serializers.IntegerField(help_text="characters of the whole body's JSON text")
    text = serializers.CharField()
    next_offset = serializers.IntegerField(allow_null=True, help_text="null: this range reaches the end")


class BodyRangeQuerySerializer(serializers.Serializer):
    offset = serializers.IntegerField(required=False, min_value=0, max_value=MAX_ID, default=0)
    length = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_RANGE,
        help_text="characters (default: CLAWGYM_MODEL_CALL_INLINE_BYTES)",
    )


class ModelCallFilterSerializer(serializers.Serializer):
    purpose = serializers.CharField(required=False)
    endpoint = serializers.CharField(required=False)
    subject = serializers.CharField(required=False, help_text="contains")
    session = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID, help_text="a proxy session's id")
    outcome = serializers.ChoiceField(["ok", "error"], required=False)

    def filter(self, queryset):
        return CallFilterForm(self.validated_data).filter(queryset)
