from django.urls import path

from . import dashboard, views, views_runs, views_samples

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

# Evaluation runs, under /evaluations/ (clawgym_site.urls includes them as the "evaluations" namespace).
run_urlpatterns = [
    path("", views_runs.run_list, name="list"),
    path("start/", views_runs.run_start, name="start"),
    path("recent/", dashboard.recent_runs, name="recent"),
    path("panel/", dashboard.dashboard_panel, name="panel"),
    path("leaderboard/", views_runs.leaderboard, name="leaderboard"),
    path("compare/", views_runs.compare, name="compare"),
    path("compare/rollouts/", views_samples.rollout_pair, name="compare-rollouts"),
    path("<int:pk>/", views_runs.run_detail, name="detail"),
    path("<int:pk>/tasks/<int:row>/", views_runs.run_task_repeats, name="repeats"),
    path("<int:pk>/samples/", views_samples.run_samples, name="samples"),
    path("<int:pk>/resume/", views_runs.run_resume, name="resume"),
    path("<int:pk>/cancel/", views_runs.run_cancel, name="cancel"),
    path("<int:pk>/regrade/", views_runs.run_regrade, name="regrade"),
    path("<int:pk>/threshold/", views_runs.run_threshold, name="threshold"),
    path("<int:pk>/export.json", views_runs.run_export_json, name="export-json"),
    path("<int:pk>/export.csv", views_runs.run_export_csv, name="export-csv"),
]
