from django.urls import path

from .views import dashboard, rollouts, runs, samples, scans

app_name = "evaluation"
urlpatterns = [
    path("", rollouts.rollout_list, name="list"),
    path("start/", rollouts.rollout_start, name="start"),
    path("trajectories/", rollouts.trajectory_stats, name="trajectory-stats"),
    path("<int:pk>/", rollouts.rollout_detail, name="detail"),
    path("<int:pk>/retry/", rollouts.rollout_retry, name="retry"),
    path("<int:pk>/rejudge/", rollouts.rollout_rejudge, name="rejudge"),
    path("<int:pk>/trajectories.jsonl", rollouts.rollout_trajectories, name="trajectories"),
]

# Evaluation runs, under /evaluations/ (clawgym_site.urls includes them as the "evaluations" namespace).
run_urlpatterns = [
    path("", runs.run_list, name="list"),
    path("start/", runs.run_start, name="start"),
    path("recent/", dashboard.recent_runs, name="recent"),
    path("panel/", dashboard.dashboard_panel, name="panel"),
    path("leaderboard/", runs.leaderboard, name="leaderboard"),
    path("compare/", runs.compare, name="compare"),
    path("compare/rollouts/", samples.rollout_pair, name="compare-rollouts"),
    path("compare/findings/", scans.compare_findings, name="compare-findings"),
    path("<int:pk>/", runs.run_detail, name="detail"),
    path("<int:pk>/tasks/<int:row>/", runs.run_task_repeats, name="repeats"),
    path("<int:pk>/samples/", samples.run_samples, name="samples"),
    path("<int:pk>/resume/", runs.run_resume, name="resume"),
    path("<int:pk>/cancel/", runs.run_cancel, name="cancel"),
    path("<int:pk>/regrade/", runs.run_regrade, name="regrade"),
    path("<int:pk>/threshold/", runs.run_threshold, name="threshold"),
    path("<int:pk>/findings/", scans.run_findings, name="findings"),
    path("<int:pk>/scan/", scans.run_scan, name="scan"),
    path("<int:pk>/export.json", runs.run_export_json, name="export-json"),
    path("<int:pk>/export.csv", runs.run_export_csv, name="export-csv"),
]
