from django.urls import path

from . import category_views, views

app_name = "tasks"
urlpatterns = [
    path("", views.task_list, name="list"),
    # Task ids start with a letter or digit, but "import" and "categories" are valid ids: these routes win for them.
    path("import/", views.import_page, name="import"),
    path("categories/", category_views.category_proposals, name="categories"),
    path("<str:external_id>/", views.task_detail, name="detail"),
    path("<str:external_id>/diff/", views.diff_view, name="diff"),
    path("<str:external_id>/sanity/", views.sanity_start, name="sanity"),
    path("<str:external_id>/r<int:number>/<str:role>/<path:path>", views.file_view, name="file"),
    path("<str:external_id>/raw/r<int:number>/<str:role>/<path:path>", views.file_raw, name="file_raw"),
]
