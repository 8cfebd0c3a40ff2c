"""Job runs over the API: list and read them; admins cancel them.

GET  /api/jobs/                 ?status=&kind=   newest first, paginated
GET  /api/jobs/{id}/            one run: progress, message, log tail, result, error, timestamps, parent
POST /api/jobs/{id}/cancel/     admin; a queued run stops at once, a running one at its next progress report
"""

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from accounts.roles import ADMIN
from lib.api_filters import QueryFilterMixin

from .api_actions import LongRunningActions, detail_error
from .models import JobRun
from .serializers import JobRunFilterSerializer, JobRunListSerializer, JobRunSerializer
from .services import cancel_job


class JobRunReadViewSet(QueryFilterMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Read-only job runs. Subclasses narrow `queryset` (e.g. to one kind) and the accepted filters."""

    queryset = JobRun.objects.select_related("created_by").with_failed_children()
    filter_serializer_class = JobRunFilterSerializer

    def get_serializer_class(self):
        return JobRunListSerializer if self.action == "list" else JobRunSerializer


@extend_schema(tags=["jobs"])
class JobRunViewSet(JobRunReadViewSet, LongRunningActions):
    write_role = ADMIN
    noun = "job"

    @extend_schema(parameters=[JobRunFilterSerializer])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(
        request=None,
        responses={
            200: JobRunSerializer,
            409: detail_error("JobAlreadyFinished", "The run had already finished; nothing changed."),
        },
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Cancel a run: a queued one is cancelled at once, a running one is asked to stop."""
        run = cancel_job(self.cancellable(self.get_object()), user=request.user)
        return Response(JobRunSerializer(run, context=self.get_serializer_context()).data)


def register(router):
    router.register("jobs", JobRunViewSet, basename="jobrun")
