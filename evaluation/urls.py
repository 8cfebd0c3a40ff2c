from django.urls import path

from . import views

app_name = "evaluation"
urlpatterns = [
    path("", views.rollout_list, name="list"),
    path("start/", views.rollout_start, name="start"),
    path("trajectories/", views.trajectory_stats, name="trajectory-stats"),
    path("<int:pk>/", views.rollout_detail, name="detail"),
    path("<int:pk>/retry/", views.rollout_retry, name="retry"),
    path("<int:pk>/rejudge/", views.rollout_rejudge, name="rejudge"),
    path("<int:pk>/trajectories.jsonl", views.rollout_trajectories, name="trajectories"),
]
