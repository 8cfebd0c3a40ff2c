"""List filters for the REST API: query parameters validated by a serializer, so a bad value is a clear 400."""


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
