import pytest

from benchmarks.models import Benchmark, BenchmarkVersion, PinnedRevision
from evaluation.testing import endpoints, make_tasks, respond


@pytest.fixture
def world(live_server_asgi, scripted_upstream, settings):
    """evaluation.testing's four tasks (two categories and an uncategorized one) frozen as eval-bench v1, and its strong
    and weak models on the scripted upstream, reached through the live proxy."""
    settings.CLAWGYM_EVAL_RETRY_BACKOFF_SECONDS = 0
    scripted_upstream.responder = respond
    revisions = make_tasks()
    strong, weak = endpoints(scripted_upstream)
    benchmark = Benchmark.objects.create(name="eval-bench")
    version = BenchmarkVersion.objects.create(benchmark=benchmark, number=1)
    PinnedRevision.objects.bulk_create(PinnedRevision(version=version, revision=r) for r in revisions.values())
    return {"revisions": revisions, "version": version, "strong": strong, "weak": weak, "upstream": scripted_upstream}
