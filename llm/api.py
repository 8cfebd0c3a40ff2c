"""The LLM gateway over the API. Reads need the viewer role; endpoint changes need admin.

GET    /api/model-endpoints/            every endpoint (the key's variable name and whether it is set, never the key)
POST   /api/model-endpoints/            admin
GET    /api/model-endpoints/{name}/     PATCH/PUT/DELETE: admin (the name does not change)
GET    /api/model-calls/                ?purpose=&endpoint=&subject=&session=<id>&outcome=ok|error  newest first
GET    /api/model-calls/{id}/           with the request and response (a large one: its head, see llm.bodies)
GET    /api/model-calls/{id}/body/request|response/     the whole body, streamed; ?offset=&length= one range
"""

from django.db.models import ProtectedError
from django.http import StreamingHttpResponse
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from accounts.roles import ADMIN
from lib.api_filters import QueryFilterMixin

from .bodies import COLUMNS, PARTS, body_range, inline_limit, pieces, with_heads
from .models import ModelCall, ModelEndpoint
from .serializers import (
    BodyRangeQuerySerializer,
    BodyRangeSerializer,
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
class ModelCallViewSet(QueryFilterMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    queryset = ModelCall.objects.all()
    filter_serializer_class = ModelCallFilterSerializer

    def get_queryset(self):
        # Bodies are never loaded whole here: a list shows none, a call its heads (llm.bodies), a body is streamed.
        if self.action == "retrieve":
            return with_heads(ModelCall.objects.all())
        return ModelCall.objects.defer(*COLUMNS.values())

    def get_serializer_class(self):
        return ModelCallListSerializer if self.action == "list" else ModelCallSerializer

    @extend_schema(parameters=[ModelCallFilterSerializer])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(
        parameters=[
            OpenApiParameter("part", OpenApiTypes.STR, OpenApiParameter.PATH, enum=PARTS),
            BodyRangeQuerySerializer,
        ],
        responses={
            200: OpenApiResponse(
                BodyRangeSerializer,
                description=(
                    "Without offset and length: the body itself (a JSON document, as an attachment). With them: that range "
                    "of its JSON text."
                ),
            )
        },
    )
    @action(detail=True, methods=["get"], url_path=r"body/(?P<part>request|response)", pagination_class=None)
    def body(self, request, pk=None, part=None):
        """A call's request or response in full, streamed in pieces; or one range of it (`?offset=&length=`,
        in characters of its JSON text)."""
        call = self.get_object()
        if not {"offset", "length"} & set(request.query_params):
            if body_range(call.pk, part, 0, 1)[0] is None:
                raise NotFound(f"call #{call.pk} has no {part}")
            response = StreamingHttpResponse(pieces(call.pk, part), content_type="application/json")
            response["Content-Disposition"] = content_disposition_header(True, f"model-call-{call.pk}-{part}.json")
            return response
        query = BodyRangeQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        offset, length = query.validated_data["offset"], query.validated_data.get("length") or inline_limit()
        total, text = body_range(call.pk, part, offset, length)
        if total is None:
            raise NotFound(f"call #{call.pk} has no {part}")
        end = offset + len(text)
        found = {
            "part": part,
            "offset": offset,
            "total": total,
            "text": text,
            "next_offset": end if end < total else None,
        }
        return Response(BodyRangeSerializer(found).data)


def register(router):
    router.register("model-endpoints", ModelEndpointViewSet, basename="modelendpoint")
    router.register("model-calls", ModelCallViewSet, basename="modelcall")
