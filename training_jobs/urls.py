"""Training pages, under /training/ (clawgym_site.urls includes them as the "training" namespace)."""

from django.urls import path
from django.views.generic import RedirectView

from .views import base_models, clone, datasets, runs

app_name = "training"
urlpatterns = [
    # /training/ itself: where the nav's Training link goes (every other section has an index)
    path("", RedirectView.as_view(pattern_name="training:datasets", permanent=False), name="index"),
    # datasets
    path("datasets/", datasets.dataset_list, name="datasets"),
    path("datasets/build/", datasets.dataset_build, name="dataset-build"),
    path("datasets/recent/", datasets.recent_datasets, name="datasets-recent"),
    path("datasets/<int:pk>/", datasets.dataset_detail, name="dataset"),
    path("datasets/<int:pk>/messages.jsonl", datasets.dataset_messages, name="dataset-messages"),
    # base models
    path("base-models/", base_models.base_model_list, name="base-models"),
    path("base-models/add/", base_models.base_model_add, name="base-model-add"),
    # before convert/NAME/: a base model named "convert" is served at convert/serve/
    path("base-models/<slug:name>/serve/", base_models.base_model_serve, name="base-model-serve"),
    path("base-models/<slug:name>/stop/", base_models.base_model_stop, name="base-model-stop"),
    path("base-models/<slug:name>/server/", base_models.base_model_server, name="base-model-server"),
    path("base-models/convert/<slug:name>/", base_models.base_model_convert, name="base-model-convert"),
    # runs
    path("runs/", runs.run_list, name="runs"),
    path("runs/start/", runs.run_start, name="run-start"),
    path("runs/start-rl/", runs.rl_run_start, name="rl-run-start"),
    path("runs/panel/", runs.runs_panel, name="runs-panel"),
    path("runs/overlay/", runs.run_overlay, name="runs-overlay"),
    path("runs/<int:pk>/", runs.run_detail, name="run"),
    path("runs/<int:pk>/checkpoints/<int:checkpoint>/server/", runs.checkpoint_server, name="checkpoint-server"),
    path("runs/<int:pk>/clone/", clone.run_clone, name="run-clone"),  # before the actions (it was one of them)
    path("runs/<int:pk>/<str:action>/", runs.run_action, name="run-action"),
]
