"""Ids read from forms and query strings (lib.bounds.parse_id): ASCII digits from 1 to MAX_ID, anything else is no id.

str.isdigit() takes "²" (int() then raises) and a 20-digit id passes int() but fits no column (OverflowError on
SQLite, DataError on PostgreSQL): before parse_id, each of these was a 500 on the pages below.
"""

import pytest
from django.urls import reverse

from lib.bounds import MAX_ID, parse_id, parse_whole_number

NOT_IDS = ["", "0", "-1", "+1", " 1", "1.0", "²", "٣", "9" * 5000, "99999999999999999999", str(MAX_ID + 1), "0x10"]


@pytest.mark.parametrize("value", NOT_IDS)
def test_what_is_not_an_id(value):
    assert parse_id(value) is None


def test_ids_and_whole_numbers():
    assert [parse_id(v) for v in ("1", "42", "007", str(MAX_ID))] == [1, 42, 7, MAX_ID]
    assert parse_whole_number("0") == 0 and parse_whole_number(str(MAX_ID + 1)) is None
    assert parse_whole_number("5", least=6) is None


PAGES = {
    "compare": lambda v: reverse("evaluations:compare") + f"?a={v}&b={v}",
    "compare rollouts": lambda v: reverse("evaluations:compare-rollouts") + f"?a={v}&b={v}&task={v}",
    "training overlay": lambda v: reverse("training:runs-overlay") + f"?run={v}&run=1",
}


@pytest.mark.django_db
@pytest.mark.parametrize("page", PAGES.values(), ids=PAGES.keys())
@pytest.mark.parametrize("value", ["²", "99999999999999999999", "9" * 5000])
def test_pages_take_a_bad_id_as_no_id(admin_client, page, value):
    assert admin_client.get(page(value)).status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["²", "99999999999999999999"])
def test_category_proposals_take_a_bad_id_as_no_id(admin_client, value):
    url = reverse("tasks:categories")
    accept = admin_client.post(url, {"action": "accept_selected", "ids": [value]})
    assert accept.status_code == 302
    assert admin_client.post(url, {"action": "reject", "proposal": value}).status_code == 404


# A filter on a foreign key (sample_id=…) has no overflow guard in Django, unlike an integer column's own lookups:
# each of these was a 500 on SQLite before its field said max_value=MAX_ID (found by bench/fuzz_api.py's long profile).
FILTERS = [
    "/api/model-calls/?session={}",
    "/api/quality-items/?sample={}",
    "/api/quality-ratings/?sample={}",
    "/api/quality-ratings/?item={}",
    "/api/synthesis/items/?batch={}",
    "/api/rollouts/?eval_run={}",
    "/api/trajectories/?rollout={}",
    "/api/eval-runs/?version={}",
]


@pytest.mark.django_db
@pytest.mark.parametrize("url", FILTERS)
def test_api_filters_refuse_an_id_past_the_column(api_as, admin_user, url):
    response = api_as(admin_user).get(url.format(10**20))
    assert response.status_code == 400, response.content
    assert api_as(admin_user).get(url.format(MAX_ID)).status_code == 200
