"""The list page of long-running work (STYLE.md §15): evaluation runs, synthesis batches, training runs, training
datasets and job runs (sanity batches among them) are listed alike.

- `?status=` is one of the model's statuses or empty for any; another is a 400 that names them, not a silent "any".
- `?page=` pages the rows, newest first as the queryset orders them; a page past the end shows the last one.
- The list's section polls itself while a row on show is still going and stops once none is: `poll` is the htmx
  attributes to put on it, empty when nothing on show is going, so the finished partial has no polling attributes.

It imports no app: a page passes its model's status choices and what "still going" means for one of its rows.
"""

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from django.core.paginator import Page, Paginator
from django.http import HttpResponseBadRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from .htmx import render_page

POLL_SECONDS = 2


class UnknownStatus(ValueError):
    """`?status=` names no status of the list's model."""

    def __init__(self, asked: str, statuses: Sequence[tuple[str, str]]):
        self.asked, self.statuses = asked, [value for value, _ in statuses]
        super().__init__(f"unknown status {asked!r}: it is one of {', '.join(self.statuses)}, or empty for any")


def filtered_by_status(queryset, asked: str, statuses: Sequence[tuple[str, str]]):
    """The rows of status `asked` ("" for every row); UnknownStatus when it is none of `statuses` (the model's
    choices)."""
    if not asked:
        return queryset
    if asked not in {value for value, _ in statuses}:
        raise UnknownStatus(asked, statuses)
    return queryset.filter(status=asked)


def poll_attributes(path: str, *, seconds: int = POLL_SECONDS) -> SafeString:
    """The htmx attributes of a section that refreshes itself from `path` (its own URL: the view answers an htmx
    request with the section alone), with the space before them."""
    return format_html(' hx-get="{}" hx-trigger="every {}s" hx-swap="outerHTML"', path, seconds)


@dataclass
class ListPage:
    page: Page
    status: str = ""
    statuses: Sequence[tuple[str, str]] = field(default_factory=list)
    live: bool = False  # a row on show is still going
    poll: SafeString = field(default_factory=lambda: SafeString(""))

    def context(self) -> dict:
        """What the list templates read: `page`, `status`, `statuses`, `unfinished` and `poll`."""
        return {
            "page": self.page,
            "status": self.status,
            "statuses": self.statuses,
            "unfinished": self.live,
            "poll": self.poll,
        }


def list_page(
    request,
    queryset,
    *,
    per_page: int,
    statuses: Sequence[tuple[str, str]] | None = None,
    is_live: Callable[[object], bool] | None = None,
    rows: Callable[[Iterable], list] | None = None,
    poll_seconds: int = POLL_SECONDS,
) -> ListPage:
    """One page of `queryset`, filtered by `?status=` when `statuses` (the model's choices) are given (UnknownStatus
    for one it lacks). `is_live(obj)`: whether a row is still going, which makes the page poll (None: it never
    polls). `rows`: what the template shows for the page's objects (counts added, say); the objects themselves when
    None."""
    status = request.GET.get("status", "") if statuses is not None else ""
    if statuses is not None:
        queryset = filtered_by_status(queryset, status, statuses)
    page = Paginator(queryset, per_page).get_page(request.GET.get("page"))
    objects = list(page.object_list)
    live = is_live is not None and any(is_live(obj) for obj in objects)
    page.object_list = rows(objects) if rows else objects
    poll = poll_attributes(request.get_full_path(), seconds=poll_seconds) if live else SafeString("")
    return ListPage(page=page, status=status, statuses=list(statuses or []), live=live, poll=poll)


def render_list(request, template: str, queryset, *, partial: str, context: dict | None = None, **options):
    """The list page (its partial for htmx) of `list_page(request, queryset, **options)` with `context` added, or a
    400 naming the statuses when `?status=` is none of them."""
    try:
        listing = list_page(request, queryset, **options)
    except UnknownStatus as exc:
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    return render_page(request, template, {**(context or {}), **listing.context()}, partial=partial)
