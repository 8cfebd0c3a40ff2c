"""The list page of long-running work (lib.listing): the status filter refuses a status the model lacks, the rows are
paged, and the section polls while a row on show is going and stops once none is. No app's model: rows are plain
objects in a list that filters like a queryset."""

from dataclasses import dataclass

import pytest
from django.template.loader import render_to_string
from django.test import RequestFactory

from lib.listing import ListPage, UnknownStatus, filtered_by_status, list_page, poll_attributes, render_list

STATUSES = [("queued", "Queued"), ("running", "Running"), ("complete", "Complete")]


@dataclass
class Row:
    pk: int
    status: str

    @property
    def is_finished(self) -> bool:
        return self.status == "complete"


class Rows(list):
    """What list_page needs of a queryset: slicing, a length and .filter(status=)."""

    def filter(self, *, status):
        return Rows(row for row in self if row.status == status)


def rows(*statuses) -> Rows:
    return Rows(Row(pk, status) for pk, status in enumerate(statuses, start=1))


def get(path="/runs/", **params):
    return RequestFactory().get(path, params)


def going(row) -> bool:
    return not row.is_finished


def test_the_status_filter_keeps_one_status_and_refuses_one_the_model_lacks():
    all_rows = rows("queued", "running", "complete", "running")

    assert filtered_by_status(all_rows, "", STATUSES) == all_rows
    assert [r.pk for r in filtered_by_status(all_rows, "running", STATUSES)] == [2, 4]
    with pytest.raises(UnknownStatus) as refused:
        filtered_by_status(all_rows, "lost", STATUSES)
    assert str(refused.value) == "unknown status 'lost': it is one of queued, running, complete, or empty for any"


def test_a_page_with_statuses_filters_by_the_query_and_says_which():
    listing = list_page(get(status="complete"), rows("running", "complete"), per_page=10, statuses=STATUSES)

    assert [r.pk for r in listing.page.object_list] == [2]
    assert (listing.status, listing.statuses) == ("complete", STATUSES)
    with pytest.raises(UnknownStatus):
        list_page(get(status="Complete"), rows("complete"), per_page=10, statuses=STATUSES)  # values, not labels


def test_without_statuses_the_status_parameter_is_not_read():
    listing = list_page(get(status="anything"), rows("running", "complete"), per_page=10)

    assert len(listing.page.object_list) == 2 and listing.status == "" and listing.statuses == []


def test_render_list_answers_an_unknown_status_with_a_400_naming_the_statuses():
    response = render_list(
        get(status="lost"), "unused.html", rows("running"), partial="rows", per_page=10, statuses=STATUSES
    )

    assert response.status_code == 400 and response["Content-Type"].startswith("text/plain")
    assert (
        response.content.decode() == "unknown status 'lost': it is one of queued, running, complete, or empty for any"
    )


def test_pages_of_rows_and_a_page_past_the_end_shows_the_last():
    many = rows(*["complete"] * 25)

    first = list_page(get(), many, per_page=10).page
    last = list_page(get(page="3"), many, per_page=10).page
    past = list_page(get(page="99"), many, per_page=10).page
    junk = list_page(get(page="x"), many, per_page=10).page

    assert [r.pk for r in first.object_list] == list(range(1, 11)) and first.paginator.num_pages == 3
    assert [r.pk for r in last.object_list] == list(range(21, 26))
    assert past.number == 3 and junk.number == 1


def test_rows_turns_the_page_objects_into_what_the_template_shows():
    listing = list_page(
        get(),
        rows("running", "complete"),
        per_page=10,
        is_live=going,
        rows=lambda objects: [{"row": o, "label": o.status.upper()} for o in objects],
    )

    assert [r["label"] for r in listing.page.object_list] == ["RUNNING", "COMPLETE"]
    assert listing.live  # judged on the objects, not the rows made of them


def test_the_page_polls_its_own_url_while_a_row_on_show_is_going():
    listing = list_page(
        get(status="running", page="1"), rows("running", "complete"), per_page=10, statuses=STATUSES, is_live=going
    )

    assert listing.live and listing.context()["unfinished"]
    assert listing.poll == ' hx-get="/runs/?status=running&amp;page=1" hx-trigger="every 2s" hx-swap="outerHTML"'


def test_polling_stops_when_nothing_on_show_is_going():
    # A running row on another page does not count: the section refreshes what it shows.
    everything = rows("running", "complete", "complete")
    on_page_2 = list_page(get(page="2"), everything, per_page=2, is_live=going)
    finished = list_page(get(status="complete"), everything, per_page=10, statuses=STATUSES, is_live=going)
    never = list_page(get(), rows("running"), per_page=10)  # no is_live: a list that never polls

    for listing in (on_page_2, finished, never):
        assert not listing.live and listing.poll == "" and not listing.context()["unfinished"]


def test_poll_attributes_escape_the_path_and_take_the_interval():
    assert poll_attributes('/runs/?q="x"', seconds=5) == (
        ' hx-get="/runs/?q=&quot;x&quot;" hx-trigger="every 5s" hx-swap="outerHTML"'
    )


def test_the_pages_links_keep_the_other_query_parameters():
    request = get(status="running", page="2")
    listing = list_page(request, rows(*["running"] * 5), per_page=2, statuses=STATUSES)

    html = render_to_string("_list_pages.html", listing.context(), request=request)

    assert "Page 2 of 3" in html
    assert (
        'rel="prev" href="?status=running&amp;page=1"' in html
        and 'rel="next" href="?status=running&amp;page=3"' in html
    )


def test_one_page_has_no_page_links():
    request = get()
    html = render_to_string("_list_pages.html", list_page(request, rows("running"), per_page=10).context(), request)

    assert "pagination" not in html


def test_the_status_filter_form_marks_the_status_shown():
    html = render_to_string("_status_filter.html", ListPage(page=None, status="running", statuses=STATUSES).context())

    assert '<option value="running" selected>Running</option>' in html and '<option value="">Any</option>' in html
    assert '<option value="queued">Queued</option>' in html
