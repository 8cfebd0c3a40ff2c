"""A generator answering with a 200 MB body keeps no item (issue 20, item 6): the client stops reading at
CLAWGYM_MAX_RESPONSE_BYTES (as shipped), the stage fails, retryable (the model's server misbehaved, not the task),
and nothing of the answer is stored. The model is the scripted server on loopback, offering 200 MB it never builds;
its task is valid JSON, which the pipeline took whole before."""

import json
import time
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from llm.models import ModelCall, ModelEndpoint
from llm.testing import PAD, Reply
from synthesis.models import SynthesisItem
from synthesis.testing import ScriptedPipeline, task
from tasks.models import Task

pytestmark = pytest.mark.django_db

HUGE = 200_000_000


def test_a_generator_answering_200_mb_keeps_no_item(scripted_upstream, settings):
    common = {
        "base_url": scripted_upstream.base_url,
        "model": "scripted-model",
        "timeout_seconds": 30,
        "max_retries": 0,
    }
    ModelEndpoint.objects.create(name="gen", roles=["generator"], **common)
    ModelEndpoint.objects.create(name="judge", roles=["judge"], **common)
    pipeline = ScriptedPipeline(["good"])  # what the later stages would answer, had the item got there

    def answer(body, purpose):
        if purpose != "synthesis:generate":
            return pipeline(body, purpose)
        # A good task whose scenario runs to 200 MB.
        good = json.dumps(task("good", 1)).replace(json.dumps(task("good", 1)["scenario"]), json.dumps(PAD))
        return Reply.text(good, padding=HUGE)

    answer.by_purpose = True
    scripted_upstream.responder = answer
    out = StringIO()
    with pytest.raises(CommandError):  # the batch keeps nothing
        call_command(
            "synthesize",
            "--route",
            "persona",
            "--count",
            "1",
            "--generator",
            "gen",
            "--judge",
            "judge",
            "--seed",
            "7",
            "--qa-stages",
            "",
            "--here",
            "--json",
            stdout=out,
            stderr=StringIO(),
        )
    found = json.loads(out.getvalue().strip().splitlines()[-1])
    assert found["kept"] == 0 and found["failed"] == {"generate": 1}

    item = SynthesisItem.objects.get(batch_id=found["batch"])
    assert (item.status, item.stage, item.task) == ("failed", "generate", None)
    assert "CLAWGYM_MAX_RESPONSE_BYTES" in item.reason and item.stage_results["generate"]["retryable"] is True
    assert not Task.objects.filter(external_id__startswith=f"syn-{found['batch']}-").exists()
    [call] = ModelCall.objects.filter(subject=item.subject)
    limit = settings.CLAWGYM_MAX_RESPONSE_BYTES
    assert call.error.startswith(f"upstream answer over the limit of {limit} bytes") and call.response is None

    # Read up to the limit and no further: the server saw its reader hang up long before 200 MB.
    [received] = scripted_upstream.requests
    deadline = time.monotonic() + 10
    while not received.disconnected and time.monotonic() < deadline:
        time.sleep(0.01)
    assert received.disconnected and not received.finished
    assert received.bytes_sent < limit + 16 * 1024 * 1024 < HUGE
