"""Training pages, under /training/ (clawgym_site.urls includes them as the "training" namespace)."""

from django.urls import path

from . import dataset_views

app_name = "training"
urlpatterns = [
    # datasets
    path("datasets/", dataset_views.dataset_list, name="datasets"),
    path("datasets/build/", dataset_views.dataset_build, name="dataset-build"),
    path("datasets/recent/", dataset_views.recent_datasets, name="datasets-recent"),
    path("datasets/<int:pk>/", dataset_views.dataset_detail, name="dataset"),
    path("datasets/<int:pk>/messages.jsonl", dataset_views.dataset_messages, name="dataset-messages"),
]
