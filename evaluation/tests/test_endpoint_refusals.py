"""An evaluation's agent endpoint is refused the same way by the API as by the start form, which offers only the
enabled agent endpoints: a disabled one is a 400 that says so, and no run is made."""

from benchmarks.models import Benchmark, BenchmarkVersion, PinnedRevision
from evaluation.models import EvalRun
from evaluation.testing import make_tasks
from llm.models import ModelEndpoint

RUNS = "/api/eval-runs/"


def test_the_api_refuses_a_disabled_agent_endpoint(api_as, admin_user, db):
    version = BenchmarkVersion.objects.create(benchmark=Benchmark.objects.create(name="fruitbench"), number=1)
    PinnedRevision.objects.bulk_create(PinnedRevision(version=version, revision=r) for r in make_tasks().values())
    ModelEndpoint.objects.create(
        name="agent", base_url="http://127.0.0.1:9/v1", model="m", roles=["agent"], enabled=False
    )
    body = {"benchmark": "fruitbench", "endpoint": "agent", "harness": "builtin"}

    response = api_as(admin_user).post(RUNS, body, format="json")
    assert response.status_code == 400, response.content
    assert "model endpoint 'agent' is disabled" in response.content.decode()
    assert not EvalRun.objects.exists()
