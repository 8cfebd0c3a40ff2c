from django.urls import path

from . import views

app_name = "llm"
urlpatterns = [
    path("endpoints/", views.endpoint_list, name="endpoints"),
    path("endpoints/new/", views.endpoint_edit, name="endpoint-add"),
    path("endpoints/<slug:name>/edit/", views.endpoint_edit, name="endpoint-edit"),
    path("endpoints/<slug:name>/test/", views.endpoint_test, name="endpoint-test"),
    path("calls/", views.call_list, name="calls"),
    path("calls/<int:pk>/", views.call_detail, name="call"),
]
