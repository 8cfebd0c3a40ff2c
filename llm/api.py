"""The LLM gateway over the API. Reads need the viewer role; endpoint changes need admin.

    GET    /api/model-endpoints/            every endpoint (the key's variable name and whether it is set, never the key)
    POST   /api/model-endpoints/            admin
    GET    /api/model-endpoints/{name}/     PATCH/PUT/DELETE: admin (the name does not change)
    GET    /api/model-calls/                ?purpose=&endpoint=&subject=&session=<id>&outcome=ok|error  newest first
    GET    /api/model-calls/{id}/           with the full request and response
"""

from django.db.models import ProtectedError
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.response import Response

from accounts.roles import ADMIN
from clawgym_site.api_filters import QueryFilterMixin

from .models import ModelCall, ModelEndpoint
from .serializers import (
    ModelCallFilterSerializer,
    ModelCallListSerializer,
    ModelCallSerializer,
    ModelEndpointSerializer,
)


@extend_schema(tags=["models"])
class ModelEndpointViewSet(viewsets.ModelViewSet):
    queryset = ModelEndpoint.objects.all()
    serializer_class = ModelEndpointSerializer
    lookup_field = "name"
    write_role = ADMIN

    def destroy(self, request, *args, **kwargs):
        try:
            return super().destroy(request, *args, **kwargs)
        except ProtectedError:
            return Response(
                {"detail": "the endpoint has proxy sessions; disable it instead (enabled: false)"},
                status=status.HTTP_409_CONFLICT,
            )


@extend_schema(tags=["models"])
class ModelCallViewSet(
    QueryFilterMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    queryset = ModelCall.objects.all()
    filter_serializer_class = ModelCallFilterSerializer

    def get_serializer_class(self):
        return ModelCallListSerializer if self.action == "list" else ModelCallSerializer

    @extend_schema(parameters=[ModelCallFilterSerializer])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)


def register(router):
    router.register("model-endpoints", ModelEndpointViewSet, basename="modelendpoint")
    router.register("model-calls", ModelCallViewSet, basename="modelcall")
