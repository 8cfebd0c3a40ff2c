"""The API shape of long-running work (STYLE.md §15): evaluation runs, synthesis batches, training runs, training
datasets and job runs (sanity batches among them) are started, resumed and cancelled alike.

    POST /api/<resource>/               start: 201 + the row, Location: its url (200 + "reused"/"resumed": true when
                                        an earlier row of the same configuration goes on instead)
    POST /api/<resource>/{id}/resume/   200 + the row; 409 {detail} when it cannot go on, saying why
    POST /api/<resource>/{id}/cancel/   200 + the row; 409 {detail} when it had finished (nothing changed)

Any of them: 400 {detail} for what the service refuses (the body was valid, the work cannot be done), 503 {detail}
when the job engine did not take the work. A viewset takes `LongRunningActions` and writes its actions as
"validate, call the service inside `refusals(...)`, answer with `started`/`detail`": the services hold the rules.
"""

from contextlib import contextmanager

from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import APIException
from rest_framework.response import Response
from rest_framework.reverse import reverse

from .engine import JobEngineError


class Refused(APIException):
    """Answered as {"detail": message} with `code` (DRF's exception handler writes it)."""

    def __init__(self, message: str, code: int = status.HTTP_400_BAD_REQUEST):
        self.status_code = code
        super().__init__(message)


@contextmanager
def refusals(*errors: type[Exception], code: int = status.HTTP_400_BAD_REQUEST):
    """Inside the block, the service's `errors` are a `code` {detail} answer and the job engine's refusal a 503."""
    try:
        yield
    except JobEngineError as exc:
        raise Refused(str(exc), status.HTTP_503_SERVICE_UNAVAILABLE) from exc
    except errors as exc:
        raise Refused(str(exc), code) from exc


def valid(serializer_class, data, **kwargs):
    """The serializer (a form) of `data`, validated: invalid data is a 400 naming the fields."""
    form = serializer_class(data=data, **kwargs)
    form.is_valid(raise_exception=True)
    return form


def validated(serializer_class, data, **kwargs) -> dict:
    """`data` validated by `serializer_class`: invalid data is a 400 naming the fields."""
    return valid(serializer_class, data, **kwargs).validated_data


def detail_error(name: str, description: str) -> OpenApiResponse:
    """A {detail} answer in the schema, under its own component name."""
    return OpenApiResponse(inline_serializer(name, {"detail": serializers.CharField()}), description=description)


class LongRunningActions:
    """For a viewset of long-running rows (with `is_finished` and `status`). `noun` names a row in messages
    ("evaluation run" #12); `detail_serializer_class` gives the row as its detail shows it (or override `detail_response`)."""

    noun = "run"
    detail_serializer_class = None

    def detail_response(self, obj, code: int = status.HTTP_200_OK, **extra) -> Response:
        """The row read again (as the viewset's queryset selects it), with `extra` keys."""
        fresh = self.get_queryset().get(pk=obj.pk)
        return Response({**self.detail_serializer_class(fresh).data, **extra}, status=code)

    def started(self, obj, *, again: bool = False, flag: str = "", **extra) -> Response:
        """201 + the new row, or 200 when `again` (an earlier row went on instead; `flag` names the body's key that
        says which); Location: its url."""
        if flag:
            extra[flag] = again
        response = self.detail_response(obj, status.HTTP_200_OK if again else status.HTTP_201_CREATED, **extra)
        response["Location"] = reverse(f"{self.basename}-detail", args=[obj.pk], request=self.request)
        return response

    def cancellable(self, obj):
        """`obj`, or a 409 when it has finished: there is nothing to cancel."""
        if obj.is_finished:
            raise Refused(
                f"{self.noun} #{obj.pk} already finished ({obj.status}); there is nothing to cancel",
                status.HTTP_409_CONFLICT,
            )
        return obj
