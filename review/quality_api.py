"""Quality sampling over the API. Reads need the viewer role; drawing a sample the admin role; rating the reviewer
role. Serializers validate; review.quality does the work.

    GET  /api/quality-samples/[{id}/]          POST (admin) draws one: {name, size, seed?, pool: {...}}: 201
    GET  /api/quality-samples/{id}/stats/      per dimension: n, mean, std (n - 1), counts of 1..5; per reviewer
    GET  /api/quality-items/[{id}/]            ?sample=ID: the drawn tasks with their pinned revisions
    GET  /api/quality-ratings/[{id}/]          ?sample=&item=&reviewer=USERNAME&mine=true
    POST /api/quality-ratings/                 reviewer: {item, <four scores 1..5>, comment?}: 201 new, 200 when it
                                               replaced the reviewer's earlier rating of the item
"""

from django.db.models import Count
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from accounts.roles import REVIEWER
from lib.api_filters import QueryFilterMixin
from lib.bounds import MAX_ID
from tasks.models import Task

from . import quality
from .models import QUALITY_DIMENSIONS, BenchmarkCandidate, QualityRating, QualitySample, QualitySampleItem
from .services import NotAllowed, ReviewError

# --- serializers -----------------------------------------------------------------------------------------------


class QualityPoolSerializer(serializers.Serializer):
    """Which tasks a sample is drawn from: those with a revision matching every filter given."""

    benchmark = serializers.CharField(required=False, help_text="only candidates of this benchmark (its name)")
    candidate_status = serializers.ChoiceField(
        choices=BenchmarkCandidate.Status.choices, required=False, help_text="with benchmark: the candidates' status"
    )
    task_status = serializers.ChoiceField(choices=Task.Status.choices, required=False)
    category = serializers.CharField(required=False, help_text="benchmark category slug")
    source = serializers.ChoiceField(choices=Task.Source.choices, required=False)


class QualitySampleSerializer(serializers.ModelSerializer):
    pool = QualityPoolSerializer(read_only=True)
    size = serializers.IntegerField(read_only=True, help_text="items drawn")
    whole_pool = serializers.BooleanField(read_only=True, help_text="the sample is the whole pool")
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = QualitySample
        fields = [
            "id",
            "name",
            "pool",
            "pool_description",
            "pool_size",
            "requested_size",
            "size",
            "whole_pool",
            "seed",
            "created_by",
            "created_at",
        ]


class QualitySampleCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    size = serializers.IntegerField(
        min_value=1, max_value=quality.MAX_SAMPLE_SIZE, help_text="N; more than the pool holds takes the whole pool"
    )
    seed = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=quality.MAX_SEED,
        help_text="omitted: a random one (stored either way, so the draw can be repeated)",
    )
    pool = QualityPoolSerializer(required=False, default=dict)


class QualityDimensionStatsSerializer(serializers.Serializer):
    dimension = serializers.CharField()
    label = serializers.CharField()
    n = serializers.IntegerField()
    mean = serializers.FloatField(allow_null=True)
    std = serializers.FloatField(allow_null=True, help_text="sample standard deviation (n - 1); null below 2 ratings")
    counts = serializers.DictField(child=serializers.IntegerField(), help_text='ratings per score, "1" to "5"')


class QualityRaterSerializer(serializers.Serializer):
    reviewer = serializers.CharField()
    ratings = serializers.IntegerField()


class QualitySampleStatsSerializer(serializers.Serializer):
    items = serializers.IntegerField()
    items_rated = serializers.IntegerField(help_text="items with at least one rating")
    ratings = serializers.IntegerField()
    dimensions = QualityDimensionStatsSerializer(many=True)
    raters = QualityRaterSerializer(many=True)


class QualityItemSerializer(serializers.ModelSerializer):
    task = serializers.CharField(source="revision.task.external_id", read_only=True)
    revision = serializers.IntegerField(source="revision.number", read_only=True, help_text="pinned at drawing time")
    revision_id = serializers.IntegerField(read_only=True)
    ratings = serializers.IntegerField(source="rating_count", read_only=True)

    class Meta:
        model = QualitySampleItem
        fields = ["id", "sample", "position", "task", "revision", "revision_id", "ratings"]


class QualityItemFilterSerializer(serializers.Serializer):
    sample = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID, help_text="a sample id")

    def filter(self, queryset):
        if "sample" in self.validated_data:
            queryset = queryset.filter(sample_id=self.validated_data["sample"])
        return queryset


class QualityRatingSerializer(serializers.ModelSerializer):
    sample = serializers.IntegerField(source="item.sample_id", read_only=True)
    reviewer = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = QualityRating
        fields = [
            "id",
            "sample",
            "item",
            "reviewer",
            *(d.field for d in QUALITY_DIMENSIONS),
            "comment",
            "created_at",
            "updated_at",
        ]


class QualityRatingInputSerializer(serializers.Serializer):
    item = serializers.PrimaryKeyRelatedField(queryset=QualitySampleItem.objects.all())

    def get_fields(self):
        fields = super().get_fields()
        for d in QUALITY_DIMENSIONS:
            fields[d.field] = serializers.IntegerField(min_value=1, max_value=5, help_text=d.help)
        fields["comment"] = serializers.CharField(
            required=False, allow_blank=True, default="", max_length=quality.MAX_COMMENT
        )
        return fields


class QualityRatingFilterSerializer(serializers.Serializer):
    sample = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID, help_text="a sample id")
    item = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID, help_text="an item id")
    reviewer = serializers.CharField(required=False, help_text="a reviewer's username")
    mine = serializers.BooleanField(required=False, help_text="only your own ratings")

    def filter(self, queryset):
        data = self.validated_data
        if "sample" in data:
            queryset = queryset.filter(item__sample_id=data["sample"])
        if "item" in data:
            queryset = queryset.filter(item_id=data["item"])
        if "reviewer" in data:
            queryset = queryset.filter(reviewer__username=data["reviewer"])
        if data.get("mine"):
            queryset = queryset.filter(reviewer=self.context["request"].user)
        return queryset


# --- views -----------------------------------------------------------------------------------------------------


def _refusal(exc: ReviewError) -> Response:
    code = status.HTTP_403_FORBIDDEN if isinstance(exc, NotAllowed) else status.HTTP_400_BAD_REQUEST
    return Response({"detail": str(exc)}, status=code)


class QualitySampleViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = QualitySampleSerializer  # writes need the admin role (RolePermission's default)

    def get_queryset(self):
        # Explicit order: Meta.ordering is not applied to aggregating queries.
        return (
            QualitySample.objects.select_related("created_by")
            .annotate(size=Count("items"))
            .order_by("-created_at", "-id")
        )

    @extend_schema(request=QualitySampleCreateSerializer, responses={201: QualitySampleSerializer})
    def create(self, request, *args, **kwargs):
        form = QualitySampleCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            sample = quality.draw_sample(
                name=data["name"], size=data["size"], seed=data.get("seed"), pool=data["pool"], user=request.user
            )
        except ReviewError as exc:
            return _refusal(exc)
        return Response(
            QualitySampleSerializer(self.get_queryset().get(pk=sample.pk)).data, status=status.HTTP_201_CREATED
        )

    @extend_schema(responses={200: QualitySampleStatsSerializer})
    @action(detail=True, methods=["get"])
    def stats(self, request, pk=None):
        return Response(quality.sample_stats(self.get_object()).as_dict())


class QualityItemViewSet(QueryFilterMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = QualityItemSerializer
    filter_serializer_class = QualityItemFilterSerializer

    def get_queryset(self):
        return (
            QualitySampleItem.objects.select_related("revision__task")
            .annotate(rating_count=Count("ratings"))
            .order_by("sample", "position")
        )

    @extend_schema(parameters=[QualityItemFilterSerializer])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)


class QualityRatingViewSet(QueryFilterMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = QualityRatingSerializer
    filter_serializer_class = QualityRatingFilterSerializer
    write_role = REVIEWER

    def get_queryset(self):
        return QualityRating.objects.select_related("item", "reviewer").order_by("item__sample", "item__position", "id")

    @extend_schema(parameters=[QualityRatingFilterSerializer])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(
        request=QualityRatingInputSerializer, responses={201: QualityRatingSerializer, 200: QualityRatingSerializer}
    )
    def create(self, request, *args, **kwargs):
        form = QualityRatingInputSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        scores = {d.field: data[d.field] for d in QUALITY_DIMENSIONS}
        try:
            rating, created = quality.rate_item(data["item"], scores, user=request.user, comment=data["comment"])
        except ReviewError as exc:
            return _refusal(exc)
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(QualityRatingSerializer(rating).data, status=code)


def register(router):
    router.register("quality-samples", QualitySampleViewSet, basename="quality-sample")
    router.register("quality-items", QualityItemViewSet, basename="quality-item")
    router.register("quality-ratings", QualityRatingViewSet, basename="quality-rating")
