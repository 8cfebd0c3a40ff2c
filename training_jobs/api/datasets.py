"""Training datasets over the API. Reads need the viewer role; building one the admin role (and the contamination
guard's override an admin with a reason, as on the pages).

    GET  /api/training/datasets/                ?status=   newest first
    POST /api/training/datasets/                {eval_runs?, groups?, endpoints?, harnesses?, sources?, since?,
                                                until?, min_reward?, max_tokens?, complete_only?, dedup?,
                                                validation_share?, seed?, name?, allow_benchmark_tasks?,
                                                override_reason?, allow_unverified_history?,
                                                unverified_history_reason?}: 202 + {dataset, url, job}; the dataset is
                                                status building until its job has built it
    GET  /api/training/datasets/{id}/           with its selection, filters, exclusions and statistics
    GET  /api/training/datasets/{id}/samples/   ?split=train|validation   paginated, messages and tools included
"""

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.reverse import reverse

from accounts.roles import ADMIN
from jobs.api_actions import detail_error, refusals, valid
from jobs.serializers import JobRunSerializer
from lib.api_filters import QueryFilterMixin

from ..models import TrainingDataset
from ..serializers import (
    BuildDatasetSerializer,
    BuildStartedSerializer,
    DatasetFilterSerializer,
    DatasetSampleSerializer,
    SampleFilterSerializer,
    TrainingDatasetDetailSerializer,
    TrainingDatasetListSerializer,
)
from ..services import datasets


@extend_schema(tags=["training"])
class TrainingDatasetViewSet(
    QueryFilterMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Training datasets: frozen selections of trajectories (reward threshold, complete interactions, token limit,
    no benchmark task unless overridden, near-duplicates removed), content-hashed, split by task."""

    queryset = TrainingDataset.objects.select_related("created_by", "override_by", "unverified_history_by")
    filter_serializer_class = DatasetFilterSerializer
    write_role = ADMIN

    def get_serializer_class(self):
        if self.action == "list":
            return TrainingDatasetListSerializer
        if self.action == "samples":
            return DatasetSampleSerializer
        return TrainingDatasetDetailSerializer

    @extend_schema(parameters=[DatasetFilterSerializer])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(
        request=BuildDatasetSerializer,
        responses={
            202: BuildStartedSerializer,
            400: detail_error("DatasetNotBuilt", "The selection, a filter or the override cannot be built."),
            503: detail_error("DatasetNotQueued", "The job engine did not take the build job."),
        },
        description="Build a dataset: its row is created (status building) and the training_jobs.build_dataset job "
        "queued; the dataset is ready once the job has run.",
    )
    def create(self, request):
        form = valid(BuildDatasetSerializer, request.data)
        with refusals(datasets.DatasetError):
            dataset = datasets.start_build(user=request.user, **form.build_settings())
        url = reverse("training-dataset-detail", args=[dataset.pk], request=request)
        job = JobRunSerializer(dataset.job_run, context=self.get_serializer_context()).data
        return Response(
            {"dataset": dataset.pk, "url": url, "job": job}, status=status.HTTP_202_ACCEPTED, headers={"Location": url}
        )

    @extend_schema(parameters=[SampleFilterSerializer], responses=DatasetSampleSerializer(many=True))
    @action(detail=True, methods=["get"])
    def samples(self, request, pk=None):
        dataset = self.get_object()
        query = valid(SampleFilterSerializer, request.query_params)
        samples = dataset.samples.select_related("trajectory").order_by("position")
        if query.validated_data.get("split"):
            samples = samples.filter(split=query.validated_data["split"])
        page = self.paginate_queryset(samples)
        return self.get_paginated_response(DatasetSampleSerializer(page, many=True).data)
