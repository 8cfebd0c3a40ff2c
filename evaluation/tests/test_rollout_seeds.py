"""A seeded run gives each rollout a seed of its own, derived from the run's seed (its endpoint's sampling), the task
and the repeat: the proxy sends it on every call of that rollout, the rollout records it, and a rerun sends the same
again. With the run's seed on every call, two repeats of a task would be one sample copied (same prompt, same seed).
End to end: scripted model -> recording proxy -> relay -> bubblewrap sandbox -> builtin agent."""

import pytest
from django.urls import reverse

from evaluation.models import Rollout
from evaluation.services import runs
from evaluation.testing import needs_bwrap
from llm.models import ModelCall
from llm.sampling import derived_seed
from llm.testing import Reply

pytestmark = [needs_bwrap, pytest.mark.django_db(transaction=True)]


def run_repeats(revision, endpoint, repeats: int = 2) -> list[Rollout]:
    """A fresh evaluation run of `revision`, run here (`evaluate --here`)."""
    run, _ = runs.create_eval_run(
        endpoint=endpoint, revisions=[revision], harness="builtin", repeats=repeats, fresh=True, user=None
    )
    return list(runs.run_here(run).rollouts.order_by("repeat_index"))


def sent_seeds(rollout: Rollout) -> list:
    """The seed on each call the proxy forwarded for the rollout (the upstream's request as the proxy sent it)."""
    calls = ModelCall.objects.filter(session=rollout.proxy_session).order_by("created_at", "id")
    return [call.request.get("seed", "none") for call in calls]


def test_derived_seeds_are_fixed_by_their_parts_on_every_machine():
    # Pinned: a rerun on another machine, or after an upgrade, must draw the same samples.
    assert [derived_seed(7, "fruit-summary", repeat) for repeat in (0, 1)] == [1891577152, 2040023165]
    assert derived_seed(8, "fruit-summary", 0) != derived_seed(7, "fruit-summary", 0)
    assert derived_seed(7, "other-task", 0) != derived_seed(7, "fruit-summary", 0)
    assert all(0 <= derived_seed(seed, "t", 3) < 2**31 for seed in (0, -1, 2**63, "abc"))


def test_each_repeat_of_a_seeded_run_has_its_own_seed_and_a_rerun_the_same(
    live_server_asgi, scripted_upstream, fruit_task, agent_endpoint, viewer_client
):
    scripted_upstream.default = Reply.text("Done.")
    agent_endpoint.sampling = {"temperature": 1.0, "seed": 7}
    agent_endpoint.save()

    first = run_repeats(fruit_task, agent_endpoint)
    assert [r.status for r in first] == [Rollout.Status.SCORED] * 2, [r.error for r in first]
    own = [derived_seed(7, "fruit-summary", repeat) for repeat in (0, 1)]
    assert [r.seed for r in first] == own and own[0] != own[1]
    # Every call of a rollout went upstream with its rollout's seed, whatever the agent asked.
    assert [sent_seeds(r) for r in first] == [[own[0]], [own[1]]]
    # Recorded on the rollout: `rollout --json`, the API and its page.
    assert [r.as_dict()["seed"] for r in first] == own
    assert viewer_client.get(f"/api/rollouts/{first[1].pk}/").json()["seed"] == own[1]
    page = viewer_client.get(reverse("evaluation:detail", args=[first[1].pk])).content.decode()
    assert f'data-testid="seed" title="the seed its model calls were sampled with">seed {own[1]}<' in page

    again = run_repeats(fruit_task, agent_endpoint)
    assert [r.seed for r in again] == own and [sent_seeds(r) for r in again] == [[own[0]], [own[1]]]

    # A run that names no seed sends none: each call samples as the upstream likes.
    agent_endpoint.sampling = {"temperature": 1.0}
    agent_endpoint.save()
    unseeded = run_repeats(fruit_task, agent_endpoint, repeats=1)
    assert [r.seed for r in unseeded] == [None] and sent_seeds(unseeded[0]) == ["none"]
