"""Harness options are text a person sends (page, API, command): an oversized object is refused, saying so."""

import pytest

from evaluation.models import Rollout
from evaluation.services.rollouts import RolloutError, create_rollouts


def test_oversized_harness_options_are_refused(fruit_task, agent_endpoint):
    options = {"timeout": 300, "system_prompt": "Be careful with the CSV header.\n" * 600}
    with pytest.raises(RolloutError, match=r"the harness options is .* bytes as JSON, over the limit of 16,384 bytes"):
        create_rollouts(fruit_task, agent_endpoint, harness="builtin", options=options, user=None)
    assert not Rollout.objects.exists()
