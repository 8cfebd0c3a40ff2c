"""A rubric rule with its own score levels (steps of 0.2, as PinchBench writes some) in the reviewer's editor and view."""

import json

from review import services
from review.tests.helpers import HTMX, save, text, url
from tasks.package import rule_levels

FIFTHS = [
    {
        "name": "Coverage",
        "target_file": "report.md",
        "weight": 60,
        "scores": {
            "1.0": "every row",
            "0.8": "one row missing",
            "0.6": "two missing",
            "0.4": "half",
            "0.2": "one row",
            "0.0": "nothing",
        },
    }
]


def test_the_rubric_editor_takes_a_rule_with_its_own_levels_and_the_view_shows_them(
    reviewer_client, candidate, reviewer
):
    services.claim(candidate, user=reviewer)
    response = save(reviewer_client, candidate, "rubric", json.dumps(FIFTHS))
    assert response.status_code == 200, text(response)
    candidate.task.refresh_from_db()
    revision = candidate.task.current_revision
    assert revision.number == 2
    # Labels canonical ("1.0" is "1"); read in level order: PostgreSQL's jsonb keeps no key order.
    assert [label for _, label, _ in rule_levels(revision.rubric[0])] == ["0", "0.2", "0.4", "0.6", "0.8", "1"]

    view = text(reviewer_client.get(url("candidate_unit", candidate) + "?field=rubric&mode=view", **HTMX))
    shown = [view.index(f'<dt class="num">{level}</dt>') for level in ("0", "0.2", "0.4", "0.6", "0.8", "1")]
    assert shown == sorted(shown) and "one row missing" in view
