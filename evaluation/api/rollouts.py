"""Rollouts and trajectories over the API. Reads need the viewer role; starting and retrying need reviewer.

GET  /api/rollouts/               ?task=&endpoint=&harness=&status=&group=&eval_run=&outcome=&min_score=
                                  &max_score=&q=   newest first
POST /api/rollouts/               {task, endpoint, harness?, repeats?, revision?, options?}: queued jobs; 201 + list
GET  /api/rollouts/{id}/          one rollout with its transcript, sub-scores and workspace changes
POST /api/rollouts/{id}/retry/    the next attempt of a failed or cancelled rollout (409 otherwise)
POST /api/rollouts/{id}/rejudge/  judge the rubric again from the stored final workspace (409 when not possible)
GET  /api/trajectories/           ?rollout=&excluded=&min_reward=            (SFT/RL data: messages, tools, reward)
GET  /api/trajectories/{id}/
"""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from accounts.roles import REVIEWER
from jobs.engine import JobEngineError
from lib.api_filters import QueryFilterMixin
from llm.models import ModelEndpoint
from tasks.models import Task

from ..models import Rollout, Trajectory
from ..serializers.rollouts import (
    RolloutFilterSerializer,
    RolloutListSerializer,
    RolloutSerializer,
    StartRolloutsSerializer,
    TrajectoryFilterSerializer,
    TrajectorySerializer,
)
from ..services.rollouts import RolloutError, rejudge_rollout, retry_rollout, start_rollouts


@extend_schema(tags=["rollouts"])
class RolloutViewSet(QueryFilterMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    queryset = Rollout.objects.select_related("revision__task", "endpoint", "proxy_session")
    filter_serializer_class = RolloutFilterSerializer
    write_role = REVIEWER

    def get_serializer_class(self):
        return RolloutListSerializer if self.action == "list" else RolloutSerializer

    @extend_schema(parameters=[RolloutFilterSerializer])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    # A plain list (one rollout a repeat), not a page: a list serializer here would be documented paginated.
    @extend_schema(
        request=StartRolloutsSerializer,
        responses={
            201: OpenApiResponse(
                {"type": "array", "items": {"$ref": "#/components/schemas/RolloutList"}}, description="one a repeat"
            )
        },
    )
    def create(self, request):
        """Start `repeats` rollouts as jobs on the sandbox queue; they run on the workers."""
        given = StartRolloutsSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        task = Task.objects.filter(external_id=data["task"]).first()
        revision = (
            (task.revisions.filter(number=data["revision"]).first() if "revision" in data else task.current_revision)
            if task
            else None
        )
        if revision is None:
            return Response({"task": [f"no task {data['task']!r} with that revision"]}, status=400)
        endpoint = ModelEndpoint.objects.filter(name=data["endpoint"]).first()
        if endpoint is None:
            return Response({"endpoint": [f"no model endpoint named {data['endpoint']!r}"]}, status=400)
        try:
            rollouts = start_rollouts(
                revision,
                endpoint,
                harness=data.get("harness"),
                repeats=data["repeats"],
                options=data.get("options"),
                user=request.user,
            )
        except RolloutError as exc:
            return Response({"detail": str(exc)}, status=400)
        except JobEngineError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        context = self.get_serializer_context()
        return Response(RolloutListSerializer(rollouts, many=True, context=context).data, status=201)

    @extend_schema(request=None, responses={200: RolloutSerializer})
    @action(detail=True, methods=["post"])
    def retry(self, request, pk=None):
        """Queue the next attempt; its results replace this attempt's on the same rollout."""
        rollout = self.get_object()
        try:
            rollout = retry_rollout(rollout, user=request.user)
        except RolloutError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        except JobEngineError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        return Response(RolloutSerializer(rollout, context=self.get_serializer_context()).data)

    @extend_schema(request=None, responses={200: RolloutSerializer})
    @action(detail=True, methods=["post"])
    def rejudge(self, request, pk=None):
        """Judge the rubric again (an incomplete rollout, once a judge endpoint exists); the score is recombined."""
        try:
            rollout = rejudge_rollout(self.get_object(), user=request.user)
        except RolloutError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(RolloutSerializer(rollout, context=self.get_serializer_context()).data)


@extend_schema(tags=["rollouts"])
class TrajectoryViewSet(QueryFilterMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    queryset = Trajectory.objects.all()
    serializer_class = TrajectorySerializer
    filter_serializer_class = TrajectoryFilterSerializer

    @extend_schema(parameters=[TrajectoryFilterSerializer])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)


def register(router):
    router.register("rollouts", RolloutViewSet, basename="rollout")
    router.register("trajectories", TrajectoryViewSet, basename="trajectory")
