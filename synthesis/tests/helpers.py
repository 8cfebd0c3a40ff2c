"""Plain helpers shared by the synthesis tests: scripted generator and judge endpoints and batches in known states."""

import socket
from decimal import Decimal

from llm.models import ModelEndpoint
from llm.testing import scripted_endpoint
from synthesis.batch_plan import batch_config, config_hash
from synthesis.models import SynthesisBatch, SynthesisItem

# A worker id on this host whose process does not exist: jobs.runner.worker_gone says it is gone.
DEAD_WORKER = f"{socket.gethostname()}:4190001:1"

PASS = {"verdict": "pass", "reason": ""}


def make_endpoints(upstream) -> tuple[ModelEndpoint, ModelEndpoint]:
    """The generator "gen" and the judge "judge", both the scripted model on loopback."""
    common = {"timeout_seconds": 30, "max_retries": 0, "price_input_per_mtok": 1, "price_output_per_mtok": 2}
    return (
        scripted_endpoint(upstream, "gen", roles=["generator"], **common),
        scripted_endpoint(upstream, "judge", roles=["judge"], **common),
    )


def make_batch(generator, judge, *, status=SynthesisBatch.Status.RUNNING, items=(), preview=False, seed=3):
    """A batch written directly, with items given as (status, stage, stage_results, reason)."""
    config = batch_config(
        route="persona",
        count=len(items) or 1,
        generator=generator,
        judge=judge,
        seed=seed,
        preview=preview,
        options={},
        qa_thresholds={},
    )
    batch = SynthesisBatch.objects.create(
        route="persona",
        requested=len(items) or 1,
        preview=preview,
        generator=generator,
        judge=judge,
        seed=seed,
        config=config,
        config_hash=config_hash(config),
        status=status,
        cost=Decimal("0.0125"),
        input_tokens=1000,
        output_tokens=250,
    )
    for index, (item_status, stage, results, reason) in enumerate(items):
        SynthesisItem.objects.create(
            batch=batch,
            index=index,
            status=item_status,
            stage=stage,
            stage_results=results,
            reason=reason,
            seed={"persona": {"id": 1, "text": "a nurse"}},
        )
    return batch


def running_batch(endpoints):
    generator, judge = endpoints
    return make_batch(
        generator,
        judge,
        items=[
            (
                "rejected",
                "generate",
                {"generate": {"verdict": "fail", "reason": "needs the network"}},
                "generate: needs the network",
            ),
            ("pending", "files", {"generate": PASS}, ""),
            ("running", "verify", {"generate": PASS, "files": PASS}, ""),
        ],
    )
