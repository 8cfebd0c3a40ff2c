"""Training pages, under /training/ (clawgym_site.urls includes them as the "training" namespace)."""

from django.urls import path

from . import base_model_views, clone_views, dataset_views, run_views

app_name = "training"
urlpatterns = [
    # datasets
    path("datasets/", dataset_views.dataset_list, name="datasets"),
    path("datasets/build/", dataset_views.dataset_build, name="dataset-build"),
    path("datasets/recent/", dataset_views.recent_datasets, name="datasets-recent"),
    path("datasets/<int:pk>/", dataset_views.dataset_detail, name="dataset"),
    path("datasets/<int:pk>/messages.jsonl", dataset_views.dataset_messages, name="dataset-messages"),
    # base models
    path("base-models/", base_model_views.base_model_list, name="base-models"),
    path("base-models/add/", base_model_views.base_model_add, name="base-model-add"),
    # before convert/NAME/: a base model named "convert" is served at convert/serve/
    path("base-models/<slug:name>/serve/", base_model_views.base_model_serve, name="base-model-serve"),
    path("base-models/<slug:name>/stop/", base_model_views.base_model_stop, name="base-model-stop"),
    path("base-models/<slug:name>/server/", base_model_views.base_model_server, name="base-model-server"),
    path("base-models/convert/<slug:name>/", base_model_views.base_model_convert, name="base-model-convert"),
    # runs
    path("runs/", run_views.run_list, name="runs"),
    path("runs/start/", run_views.run_start, name="run-start"),
    path("runs/start-rl/", run_views.rl_run_start, name="rl-run-start"),
    path("runs/panel/", run_views.runs_panel, name="runs-panel"),
    path("runs/overlay/", run_views.run_overlay, name="runs-overlay"),
    path("runs/<int:pk>/", run_views.run_detail, name="run"),
    path("runs/<int:pk>/checkpoints/<int:checkpoint>/server/", run_views.checkpoint_server, name="checkpoint-server"),
    path("runs/<int:pk>/clone/", clone_views.run_clone, name="run-clone"),  # before the actions (it was one of them)
    path("runs/<int:pk>/<str:action>/", run_views.run_action, name="run-action"),
]
