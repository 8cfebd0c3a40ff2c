"""The periodic job training.stop_idle_servers (jobs.periodic's table) stops idle model servers on the gpu queue."""

from datetime import timedelta

from django.utils import timezone

from jobs.testing import run_now
from llm.models import ModelEndpoint
from training_jobs.models import ModelServer


def test_idle_model_servers_are_stopped_by_the_gpu_queue_job(db):
    endpoint = ModelEndpoint.objects.create(
        name="ckpt-1-10", base_url="http://127.0.0.1:9/v1", model="m", roles=["agent"]
    )
    server = ModelServer.objects.create(
        endpoint=endpoint, backend="transformers", host="127.0.0.1", port=9, status=ModelServer.Status.READY
    )
    ModelServer.objects.filter(pk=server.pk).update(created_at=timezone.now() - timedelta(hours=1))

    run = run_now("training.stop_idle_servers")

    assert run.queue == "gpu" and run.result == {"stopped": [server.pk]}
    server.refresh_from_db()
    endpoint.refresh_from_db()
    assert server.status == ModelServer.Status.STOPPED and not endpoint.enabled
