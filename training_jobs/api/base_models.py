"""Base models over the API. Reads need the viewer role; adding one the admin role.

GET  /api/training/base-models/            the registered base models (name, path, architecture, …)
GET  /api/training/base-models/{name}/
POST /api/training/base-models/            {name, path, notes?}: 201 + the base model (a folder on the machines)
                                           {converter}: 202 + {job} (the conversion, queued on the gpu queue)
                                           or 200 + the base model when it is registered already
GET  /api/training/base-models/converters/ the shipped converters and whether each is installed, registered
POST /api/training/base-models/{name}/serve/  202 + the server (status "starting"; the training.serve_checkpoint job
                                           on the gpu queue starts it as endpoint base-NAME), Location: its url under
                                           /api/training/servers/ (the same server while one is starting or ready)
POST /api/training/base-models/{name}/stop/   200 + {stopped: [servers]}: those starting or ready, now stopped (their
                                           endpoint disabled); an empty list when none was
"""

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from accounts.roles import ADMIN
from jobs.engine import JobEngineError
from jobs.redaction import hide_paths, sees_server_details
from jobs.serializers import JobRunSerializer
from training import converters

from .. import base_models, serving
from ..models import BaseModel
from ..serializers import ModelServerSerializer


class BaseModelSerializer(serializers.ModelSerializer):
    """A base model; its folder in full for admins, its last part for everyone else (jobs.redaction)."""

    class Meta:
        model = BaseModel
        fields = ["name", "path", "architecture", "chat_template", "context_length", "notes", "created_at"]
        read_only_fields = fields

    def to_representation(self, instance):
        data = super().to_representation(instance)
        request = self.context.get("request")
        if request is None or not sees_server_details(request.user):
            data["path"] = hide_paths(data["path"])
        return data


class ConverterSerializer(serializers.Serializer):
    """A shipped converter (base_models.converter_choices): whether its package is installed, whether its model is
    registered, and the conversion job running now."""

    name = serializers.CharField()
    title = serializers.CharField()
    package = serializers.CharField(help_text="the package that ships its weights")
    license = serializers.CharField()
    installed = serializers.BooleanField()
    registered = serializers.BooleanField()
    converting = serializers.IntegerField(allow_null=True, help_text="the conversion job's id while one runs")


class ConversionQueuedSerializer(serializers.Serializer):
    job = JobRunSerializer()


class StoppedServersSerializer(serializers.Serializer):
    stopped = ModelServerSerializer(many=True)


class AddBaseModelSerializer(serializers.Serializer):
    name = serializers.SlugField(max_length=120, required=False)
    path = serializers.CharField(max_length=1000, required=False)
    notes = serializers.CharField(required=False, allow_blank=True, default="")
    converter = serializers.ChoiceField(choices=list(converters.CONVERTERS), required=False)

    def validate(self, data):
        if data.get("converter"):
            if data.get("path"):
                raise serializers.ValidationError("give a converter or a name and path, not both")
        elif not (data.get("name") and data.get("path")):
            raise serializers.ValidationError("give a name and a path, or a converter")
        return data


@extend_schema(tags=["training"])
class BaseModelViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Base models: the folders training runs start from."""

    queryset = BaseModel.objects.all()
    serializer_class = BaseModelSerializer
    lookup_field = "name"
    write_role = ADMIN

    @extend_schema(
        request=AddBaseModelSerializer,
        responses={200: BaseModelSerializer, 201: BaseModelSerializer, 202: ConversionQueuedSerializer},
    )
    def create(self, request):
        given = AddBaseModelSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        try:
            if data.get("converter"):
                existing = BaseModel.objects.filter(name=data["converter"]).first()
                if existing is not None:
                    return Response(BaseModelSerializer(existing, context={"request": request}).data)
                run = base_models.request_conversion(data["converter"], user=request.user)
                job = JobRunSerializer(run, context={"request": request}).data
                return Response({"job": job}, status=status.HTTP_202_ACCEPTED)
            row, created = base_models.add_by_path(data["name"], data["path"], notes=data["notes"])
        except (base_models.BaseModelError, converters.ConversionError) as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        except JobEngineError as exc:
            return Response(
                {"detail": f"the job engine did not take the conversion: {exc}"},
                status=status.HTTP_503_SERVICE_UNAVAILABLE,
            )
        return Response(
            BaseModelSerializer(row, context={"request": request}).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    @extend_schema(responses={200: ConverterSerializer(many=True)})
    @action(detail=False, methods=["get"], pagination_class=None)
    def converters(self, request):
        rows = [
            {**c, "converting": c["converting"].pk if c["converting"] else None}
            for c in base_models.converter_choices()
        ]
        return Response(rows)

    @extend_schema(request=None, responses={202: ModelServerSerializer})
    @action(detail=True, methods=["post"])
    def serve(self, request, name=None):
        """Queue the model's server (endpoint base-NAME) on a gpu worker; 202 at once with the server, to follow at
        its url (the same server again while one is starting or ready)."""
        try:
            server = serving.request_serving(self.get_object(), user=request.user)
        except JobEngineError as exc:
            return Response(
                {"detail": f"the job engine did not take the server: {exc}"}, status=status.HTTP_503_SERVICE_UNAVAILABLE
            )
        body = ModelServerSerializer(server, context=self.get_serializer_context()).data
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["url"]})

    @extend_schema(request=None, responses={200: StoppedServersSerializer})
    @action(detail=True, methods=["post"])
    def stop(self, request, name=None):
        """Stop the model's servers that are starting or ready and disable the endpoint base-NAME."""
        stopped = serving.stop_serving(self.get_object(), user=request.user)
        return Response(
            {"stopped": ModelServerSerializer(stopped, many=True, context=self.get_serializer_context()).data}
        )
