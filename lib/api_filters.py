"""List filters for the REST API: query parameters validated by a serializer, so a bad value is a clear 400, and a
parameter no list understands is a 400 too (a misspelt `?staus=ready` would otherwise list everything)."""

from rest_framework.exceptions import ValidationError
from rest_framework.filters import BaseFilterBackend
from rest_framework.settings import api_settings


class QueryFilterMixin:
    """For a viewset: on `list`, validate the query parameters with `filter_serializer_class` and apply its
    `filter(queryset)`. The serializer gets the usual context (`request` included) for per-user filters."""

    filter_serializer_class = None

    def filter_queryset(self, queryset):
        queryset = super().filter_queryset(queryset)
        if self.action != "list" or self.filter_serializer_class is None:
            return queryset
        filters = self.filter_serializer_class(data=self.request.query_params, context=self.get_serializer_context())
        filters.is_valid(raise_exception=True)
        return filters.filter(queryset)


def known_list_parameters(view) -> set[str]:
    """The query parameters a list view understands: its filter serializer's fields, its filter backends' own
    parameters (search, ordering), its paginator's and the format override."""
    known = {api_settings.URL_FORMAT_OVERRIDE} - {None}
    filter_class = getattr(view, "filter_serializer_class", None)
    if filter_class is not None:
        context = view.get_serializer_context() if hasattr(view, "get_serializer_context") else {}
        known |= set(filter_class(context=context).fields)
    for backend in getattr(view, "filter_backends", ()):
        known |= {getattr(backend, name) for name in ("search_param", "ordering_param") if hasattr(backend, name)}
    paginator = getattr(view, "paginator", None)
    if paginator is not None:
        for name in (
            "page_query_param",
            "page_size_query_param",
            "limit_query_param",
            "offset_query_param",
            "cursor_query_param",
        ):
            value = getattr(paginator, name, None)
            if value:
                known.add(value)
    return known


class UnknownParametersFilter(BaseFilterBackend):
    """A filter backend (first in every list view's backends) answering 400 for a query parameter the list does not
    understand, naming it and the ones it does. Only lists: other actions read their own parameters."""

    def filter_queryset(self, request, queryset, view):
        if getattr(view, "action", None) != "list":
            return queryset
        known = known_list_parameters(view)
        unknown = sorted(set(request.query_params) - known)
        if unknown:
            allowed = ", ".join(sorted(known))
            raise ValidationError(
                {name: [f"unknown query parameter for this list (it takes: {allowed})"] for name in unknown}
            )
        return queryset


def refuse_unknown_parameters(request, known, *, where: str = "for this list") -> None:
    """For a view that reads its own query parameters (not a model list): a parameter outside `known` (the format
    override is always known) is a 400 naming it and the ones taken, in the lists' words."""
    known = set(known) | ({api_settings.URL_FORMAT_OVERRIDE} - {None})
    unknown = sorted(set(request.query_params) - known)
    if unknown:
        allowed = ", ".join(sorted(known))
        raise ValidationError({name: [f"unknown query parameter {where} (it takes: {allowed})"] for name in unknown})


def list_query(request, serializer_class=None, *, also=("page",)) -> dict:
    """A non-model list's query parameters validated by `serializer_class` (none: it takes none of its own); one it
    does not take is a 400 first. `page` is taken as on every list, even by a list that is not paginated."""
    fields = set(serializer_class().fields) if serializer_class is not None else set()
    refuse_unknown_parameters(request, fields | set(also))
    if serializer_class is None:
        return {}
    form = serializer_class(data=request.query_params)
    form.is_valid(raise_exception=True)
    return form.validated_data
