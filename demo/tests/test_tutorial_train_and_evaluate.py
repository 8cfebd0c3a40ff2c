"""docs/tutorials/train-and-evaluate.md, walked as its reader would: every command of the page, in order, in one
shell (lib.docs_testing): the tiny base model served and evaluated on the held-out curriculum, demonstrations
from the demo agent, a dataset, an SFT run, its checkpoint served, evaluated and compared, and an RL step whose
rollouts a django-q worker runs in the sandbox through the recording proxy. `make demo` is the one line it stands in
for: the demo server, the admin and a worker whose rollouts reach this test's proxy."""

import pytest

from accounts.roles import ADMIN
from accounts.testing import make_user
from evaluation.models import EvalRun
from jobs.testing import database_url
from lib.docs_testing import DOCS, walk
from training_jobs.models import ModelServer, TrainingRun
from training_jobs.serving import stop_server

# The whole loop, two model servers and an RL step: 6 minutes on two cores at load 7, past the default 600 s on a
# slower CI machine.
pytestmark = [pytest.mark.once, pytest.mark.workers, pytest.mark.timeout(900), pytest.mark.usefixtures("bwrap")]

PAGE = DOCS / "tutorials" / "train-and-evaluate.md"


def test_the_training_tutorial_runs_to_its_end(live_server_asgi, demo_server, proxied_django_q_worker, tmp_path):
    make_user("admin", ADMIN)  # what `make run` creates
    try:
        walked = walk(
            PAGE,
            tmp_path,
            env={
                "DATABASE_URL": database_url(),
                "CLAWGYM_PROXY_PUBLIC_URL": live_server_asgi.url,
                "HF_HUB_OFFLINE": "1",
            },
            stand_ins={"make demo": "the demo_server fixture, an admin, and a worker reaching this test's proxy"},
        )
        # The page's last step stops the servers it started.
        left_running = list(ModelServer.objects.exclude(status=ModelServer.Status.STOPPED).values_list("pk", flat=True))
    finally:
        for server in ModelServer.objects.exclude(status=ModelServer.Status.STOPPED):
            stop_server(server)  # also when a step before the page's last failed

    assert "the train split: --tasks-from prefix=curriculum-s0-train-" in walked.stdout
    runs = {run.endpoint.name: run for run in EvalRun.objects.select_related("endpoint")}
    assert set(runs) == {"base-tiny", "demo-agent-good", next(n for n in runs if n.startswith("ckpt-"))}, runs
    assert {run.status for run in runs.values()} == {EvalRun.Status.COMPLETE}, {n: r.status for n, r in runs.items()}
    assert "mean difference" in walked.stdout.lower()

    sft, rl = TrainingRun.objects.get(kind="sft"), TrainingRun.objects.get(kind="rl")
    assert (sft.status, rl.status) == (TrainingRun.Status.SUCCEEDED, TrainingRun.Status.SUCCEEDED), (
        sft.error,
        rl.error,
    )
    assert rl.metrics.filter(step=1).exists()
    assert not left_running
