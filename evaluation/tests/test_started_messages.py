"""The message that a run was resumed names the run (data-started), and the run's page says when it has finished
(data-finished): static/js/started.js then drops the message (the synthesis browser test watches one go)."""

from django.urls import reverse
from django.utils import timezone

from benchmarks.models import Benchmark, BenchmarkVersion, PinnedRevision
from evaluation.models import EvalRun
from evaluation.services import runs
from evaluation.testing import make_tasks
from llm.models import ModelEndpoint


def test_the_resume_message_names_its_run_until_it_has_finished(admin_client, taxonomy):
    version = BenchmarkVersion.objects.create(benchmark=Benchmark.objects.create(name="b"), number=1)
    PinnedRevision.objects.bulk_create(PinnedRevision(version=version, revision=r) for r in make_tasks().values())
    model = ModelEndpoint.objects.create(name="m", base_url="http://127.0.0.1:9/v1", model="m", roles=["agent"])
    run, _ = runs.create_eval_run(endpoint=model, benchmark_version=version, harness="builtin", fresh=True, user=None)
    EvalRun.objects.filter(pk=run.pk).update(status=EvalRun.Status.CANCELLED, finished_at=timezone.now())

    html = admin_client.post(reverse("evaluations:resume", args=[run.pk]), follow=True).content.decode()
    assert f'<li class="msg-success" data-started="run-{run.pk}">{run.name} is resumed' in html
    assert f'data-finished="run-{run.pk}"' not in html

    EvalRun.objects.filter(pk=run.pk).update(status=EvalRun.Status.COMPLETE, finished_at=timezone.now())
    html = admin_client.get(reverse("evaluations:detail", args=[run.pk])).content.decode()
    assert f'data-finished="run-{run.pk}"' in html
