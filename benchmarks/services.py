"""Every change of a benchmark's own rows: making a benchmark, and storing a frozen version.

What a version pins is decided by the review (review.services.freeze_version pins the revision each accepted
candidate was accepted at); this module numbers the version and stores it with its pins, once.
"""

from django.db import IntegrityError, transaction

from accounts.roles import ADMIN, has_role
from lib.bounds import TextRefused, check_chars, check_text
from tasks.models import TaskRevision

from .contamination import ContaminationError, contamination_for, describe
from .models import Benchmark, BenchmarkVersion, PinnedRevision


class BenchmarkError(Exception):
    """The change is refused; the message says why."""


class NotAllowed(BenchmarkError):
    """The acting user lacks the role the change needs."""


class Contaminated(BenchmarkError):
    """Training data holds tasks of the version (the same content, or a near-duplicate); `findings` lists them."""

    def __init__(self, benchmark: Benchmark, findings: list):
        self.findings = findings
        tasks = len({f.task for f in findings})
        super().__init__(
            f"{benchmark.name} cannot be frozen: training data holds {tasks} of its task(s) (contamination): "
            + describe(findings)
        )


def _require_admin(user, what: str) -> None:
    if not has_role(user, ADMIN):
        raise NotAllowed(f"{what} needs the {ADMIN} role")


def _name(text: str, what: str, model, field: str = "name") -> str:
    """A name within its column's length (a CharField's max_length)."""
    try:
        return check_chars(text, what, model._meta.get_field(field).max_length)
    except TextRefused as exc:
        raise BenchmarkError(str(exc)) from None


def get_or_create_benchmark(
    name: str, *, user, description: str = "", lazy_tolerance: float = 0.0
) -> tuple[Benchmark, bool]:
    """The benchmark called `name`, made when missing. `user` None: a trusted script (a management command)."""
    found = Benchmark.objects.filter(name=name).first()
    if found is not None:
        return found, False
    if user is not None:
        _require_admin(user, "creating a benchmark")
    if not 0.0 <= float(lazy_tolerance) <= 1.0:
        raise BenchmarkError(f"the lazy-score tolerance must be in [0, 1], not {lazy_tolerance:g}")
    _name(name, "the benchmark name", Benchmark)
    try:
        check_text(description or "", "the benchmark description", setting="CLAWGYM_MAX_NOTE_BYTES")
    except TextRefused as exc:
        raise BenchmarkError(str(exc)) from None
    defaults = {"description": description, "lazy_tolerance": float(lazy_tolerance)}
    return Benchmark.objects.get_or_create(name=name, defaults=defaults)


def create_version(benchmark: Benchmark, revision_ids, *, user, note: str = "") -> BenchmarkVersion:
    """A new immutable version of `benchmark`, numbered one past its latest, pinning the revisions `revision_ids`."""
    _require_admin(user, "freezing a benchmark version")
    _name(note, "the version note", BenchmarkVersion, "note")
    revision_ids = list(dict.fromkeys(revision_ids))
    if not revision_ids:
        raise BenchmarkError(f"a version of {benchmark.name} needs at least one revision to pin")
    # A benchmark scores what models were not trained on: no version pins a task training data already holds.
    try:
        findings = contamination_for(TaskRevision.objects.filter(pk__in=revision_ids).select_related("task"))
    except ContaminationError as exc:
        raise BenchmarkError(f"{benchmark.name} cannot be frozen: {exc}") from None
    if findings:
        raise Contaminated(benchmark, findings)
    for attempt in range(2):
        try:
            with transaction.atomic():
                last = benchmark.versions.order_by("-number").values_list("number", flat=True).first() or 0
                version = BenchmarkVersion.objects.create(
                    benchmark=benchmark, number=last + 1, created_by=user, note=note
                )
                PinnedRevision.objects.bulk_create(
                    PinnedRevision(version=version, revision_id=pk) for pk in revision_ids
                )
                return version
        except IntegrityError:
            # Two admins froze at once and took the same number: the second retries with the next.
            if attempt:
                raise
    raise AssertionError("unreachable")
