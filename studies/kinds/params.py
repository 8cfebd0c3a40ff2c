"""The parameters the study kinds share, checked: each reader returns the object (or number) or raises StudyError
saying what is wrong."""

from django.conf import settings

from benchmarks.models import BenchmarkVersion
from evaluation.harnesses import HARNESSES
from llm.models import ModelEndpoint

from .base import StudyError


def version(value) -> BenchmarkVersion:
    if value in (None, ""):
        raise StudyError("a benchmark version is needed (benchmark_version: its id)")
    version = BenchmarkVersion.objects.select_related("benchmark").filter(pk=an_id(value, "benchmark_version")).first()
    if version is None:
        raise StudyError(f"no benchmark version #{value}")
    return version


def endpoint(value) -> ModelEndpoint:
    if value in (None, ""):
        raise StudyError("an endpoint is needed (endpoint: its id)")
    endpoint = ModelEndpoint.objects.filter(pk=an_id(value, "endpoint")).first()
    if endpoint is None:
        raise StudyError(f"no model endpoint #{value}")
    return endpoint


def harness(value) -> str:
    harness = value or settings.CLAWGYM_DEFAULT_HARNESS
    if harness not in HARNESSES:
        raise StudyError(f"unknown harness {harness!r}; known: {', '.join(HARNESSES)}")
    return harness


def an_id(value, name: str) -> int:
    if isinstance(value, bool):
        raise StudyError(f"{name} must be an id, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise StudyError(f"{name} must be an id, got {value!r}") from None


def whole(value, name: str, *, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise StudyError(f"{name} must be a whole number from {low} to {high}, got {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise StudyError(f"{name} must be a whole number from {low} to {high}, got {value!r}") from None
    if not low <= number <= high:
        raise StudyError(f"{name} must be a whole number from {low} to {high}, got {number}")
    return number
