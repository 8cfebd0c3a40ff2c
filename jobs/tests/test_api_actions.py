"""The API shape of long-running work (jobs.api_actions), on a small viewset of job runs: start answers 201 + the row
and its Location (200 and the flag when an earlier row goes on), resume the row, cancel the row or a 409 once it has
finished; a service's refusal is a 400 (or the code asked) {detail}, the job engine's a 503 {detail}."""

import json

import pytest
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.test import APIRequestFactory

from jobs.api_actions import LongRunningActions, Refused, detail_error, refusals, valid, validated
from jobs.engine import JobEngineError
from jobs.models import JobRun


class NotStartable(Exception):
    """A service's refusal."""


class StartSerializer(serializers.Serializer):
    kind = serializers.CharField()
    again = serializers.BooleanField(default=False)
    refuse = serializers.ChoiceField(choices=["", "service", "engine"], default="")


class RunSerializer(serializers.ModelSerializer):
    class Meta:
        model = JobRun
        fields = ["id", "kind", "status"]


def service(kind: str, refuse: str) -> JobRun:
    if refuse == "service":
        raise NotStartable(f"{kind} cannot start: no worker has the tools")
    if refuse == "engine":
        raise JobEngineError("the broker is not reachable")
    return JobRun.objects.create(kind=kind, engine="django_q")


class RunViewSet(LongRunningActions, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Job runs, started, resumed and cancelled through the helpers."""

    queryset = JobRun.objects.all()
    detail_serializer_class = RunSerializer
    noun = "test run"
    authentication_classes, permission_classes = [], []

    def create(self, request):
        data = validated(StartSerializer, request.data)
        with refusals(NotStartable):
            run = service(data["kind"], data["refuse"])
        return self.started(run, again=data["again"], flag="reused")

    @action(detail=True, methods=["post"])
    def resume(self, request, pk=None):
        run = self.get_object()
        refuse = validated(StartSerializer, {"kind": run.kind, **request.data})["refuse"]
        with refusals(NotStartable, code=status.HTTP_409_CONFLICT):
            service(run.kind, refuse)
        return self.detail_response(run)

    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        run = self.cancellable(self.get_object())
        JobRun.objects.filter(pk=run.pk).update(status=JobRun.Status.CANCELLED, finished_at=timezone.now())
        return self.detail_response(run)


def post(action_name: str, data=None, pk=None):
    view = RunViewSet.as_view({"post": action_name}, basename="jobrun", detail=pk is not None)
    request = APIRequestFactory().post("/", data or {}, format="json")
    response = view(request, pk=pk) if pk is not None else view(request)
    response.render()
    return response


def body(response) -> dict:
    return json.loads(response.content)


@pytest.mark.django_db
def test_start_answers_201_with_the_row_and_its_location():
    response = post("create", {"kind": "jobs.ping"})

    run = JobRun.objects.get()
    assert response.status_code == 201
    assert response.data["id"] == run.pk and response.data["kind"] == "jobs.ping" and response.data["reused"] is False
    assert response["Location"] == f"http://testserver/api/jobs/{run.pk}/"


@pytest.mark.django_db
def test_start_of_an_earlier_configuration_answers_200_and_says_so():
    response = post("create", {"kind": "jobs.ping", "again": True})

    assert response.status_code == 200 and response.data["reused"] is True and response.has_header("Location")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("refuse", "code", "detail"),
    [
        ("service", 400, "jobs.ping cannot start: no worker has the tools"),
        ("engine", 503, "the broker is not reachable"),
    ],
)
def test_start_refused_by_the_service_or_the_engine_is_a_detail(refuse, code, detail):
    response = post("create", {"kind": "jobs.ping", "refuse": refuse})

    assert response.status_code == code and body(response) == {"detail": detail}
    assert not JobRun.objects.exists()


@pytest.mark.django_db
def test_invalid_data_is_a_400_naming_the_field():
    response = post("create", {"refuse": "maybe"})

    assert response.status_code == 400 and set(body(response)) == {"kind", "refuse"}


@pytest.mark.django_db
def test_resume_answers_the_row_or_the_code_asked_for_a_refusal():
    run = JobRun.objects.create(kind="jobs.ping", engine="django_q", status=JobRun.Status.FAILED)

    assert post("resume", pk=run.pk).data["id"] == run.pk
    refused = post("resume", {"refuse": "service"}, pk=run.pk)
    assert refused.status_code == 409 and body(refused) == {"detail": "jobs.ping cannot start: no worker has the tools"}
    assert post("resume", {"refuse": "engine"}, pk=run.pk).status_code == 503


@pytest.mark.django_db
def test_cancel_answers_the_row_then_409_once_it_has_finished():
    run = JobRun.objects.create(kind="jobs.ping", engine="django_q")

    cancelled = post("cancel", pk=run.pk)
    again = post("cancel", pk=run.pk)

    assert cancelled.status_code == 200 and cancelled.data["status"] == "cancelled"
    assert again.status_code == 409
    assert body(again) == {"detail": f"test run #{run.pk} already finished (cancelled); there is nothing to cancel"}


@pytest.mark.django_db
def test_the_jobs_api_cancels_with_the_same_shape(api_as, admin_user):
    run = JobRun.objects.create(kind="jobs.ping", engine="django_q", status=JobRun.Status.SUCCEEDED)

    response = api_as(admin_user).post(f"/api/jobs/{run.pk}/cancel/")

    assert response.status_code == 409
    assert response.json() == {"detail": f"job #{run.pk} already finished (succeeded); there is nothing to cancel"}


def test_refusals_let_other_errors_through_and_refused_carries_its_code():
    with pytest.raises(KeyError), refusals(NotStartable):
        raise KeyError("a bug is no refusal")
    with pytest.raises(Refused) as caught, refusals(code=status.HTTP_409_CONFLICT):
        raise JobEngineError("down")  # the engine's refusal is a 503 whatever the service's code
    assert caught.value.status_code == 503 and caught.value.detail == "down"


def test_valid_returns_the_form_and_validated_its_data():
    assert valid(StartSerializer, {"kind": "x"}).validated_data == {"kind": "x", "again": False, "refuse": ""}
    assert validated(StartSerializer, {"kind": "x", "again": True})["again"] is True


def test_detail_error_is_a_named_detail_component():
    answer = detail_error("RunFinished", "The run has finished.")

    assert isinstance(answer, OpenApiResponse) and answer.description == "The run has finished."
    assert type(answer.response).__name__ == "RunFinished" and set(answer.response.get_fields()) == {"detail"}
