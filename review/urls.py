"""The reviewers' pages under /review/, each route written out; the views live in review/views/<area>.py."""

from django.urls import path

from .views import benchmarks, candidate, difficulty, measures, propose, quality, queue, solve, team

app_name = "review"

urlpatterns = [
    # the candidate queue
    path("", queue.queue, name="queue"),
    path("diagnose-all/", queue.diagnose_all, name="diagnose_all"),
    path("candidates/<int:pk>/row/", queue.queue_row, name="queue_row"),
    path("candidates/<int:pk>/claim/", queue.claim, name="claim"),
    path("candidates/<int:pk>/release/", queue.release, name="release"),
    path("candidates/<int:pk>/decide-from-queue/", queue.queue_decide, name="queue_decide"),
    path("bulk-decide/", queue.bulk_decide, name="bulk_decide"),
    path("candidates/<int:pk>/diagnose/", queue.diagnose_one, name="diagnose_one"),
    # one candidate
    path("candidates/<int:pk>/", candidate.candidate_page, name="candidate"),
    path("candidates/<int:pk>/part/<slug:name>/", candidate.candidate_part, name="candidate_part"),
    path("candidates/<int:pk>/unit/", candidate.candidate_unit, name="candidate_unit"),
    path("candidates/<int:pk>/edit/", candidate.candidate_edit, name="candidate_edit"),
    path("candidates/<int:pk>/issues/<int:issue_pk>/", candidate.candidate_issue, name="candidate_issue"),
    path("candidates/<int:pk>/verdict/", candidate.verdict, name="verdict"),
    path("candidates/<int:pk>/apply-fix/", candidate.apply_fix, name="apply_fix"),
    path("candidates/<int:pk>/decide/", candidate.decide, name="decide"),
    path("candidates/<int:pk>/rediagnose/", candidate.diagnose, name="candidate_diagnose"),
    # one candidate: the solve panel
    path("candidates/<int:pk>/solve/", solve.solve_panel, name="solve"),
    path("candidates/<int:pk>/solve/open/", solve.solve_open, name="solve_open"),
    path("candidates/<int:pk>/solve/file/", solve.solve_file, name="solve_file"),
    path("candidates/<int:pk>/solve/file/save/", solve.solve_file_save, name="solve_file_save"),
    path("candidates/<int:pk>/solve/run/", solve.solve_run, name="solve_run"),
    path("candidates/<int:pk>/solve/save/", solve.solve_save, name="solve_save"),
    path("candidates/<int:pk>/solve/discard/", solve.solve_discard, name="solve_discard"),
    path("candidates/<int:pk>/save-all/", solve.save_all, name="save_all"),
    path("candidates/<int:pk>/syntax/", solve.syntax, name="syntax"),
    path("candidates/<int:pk>/check/", solve.check_source, name="candidate_check"),
    # benchmarks and their versions
    path("benchmarks/", benchmarks.benchmark_list, name="benchmarks"),
    path("benchmarks/<slug:name>/", benchmarks.benchmark_detail, name="benchmark"),
    path("benchmarks/<slug:name>/freeze/", benchmarks.freeze, name="freeze"),
    path("benchmarks/<slug:name>/lazy-tolerance/", benchmarks.lazy_tolerance, name="lazy_tolerance"),
    path("benchmarks/<slug:name>/propose/", benchmarks.propose, name="propose"),
    path("benchmarks/<slug:name>/v<int:number>/", benchmarks.version_detail, name="version"),
    path("benchmarks/<slug:name>/v<int:number>/export/", benchmarks.version_export, name="version_export"),
    # quality sampling
    path("quality/", quality.quality_list, name="quality_list"),
    path("quality/new/", quality.quality_create, name="quality_create"),
    path("quality/<int:pk>/", quality.quality_sample, name="quality_sample"),
    path("quality/<int:pk>/items/<int:item_pk>/", quality.quality_rate, name="quality_rate"),
    # proposing a task
    path("tasks/<str:external_id>/propose/", propose.propose_task, name="propose_task"),
    # difficulty filtering
    path("benchmarks/<slug:name>/difficulty/", difficulty.benchmark_difficulty, name="difficulty"),
    path("benchmarks/<slug:name>/difficulty/start/", difficulty.difficulty_start, name="difficulty_start"),
    path(
        "benchmarks/<slug:name>/difficulty/thresholds/", difficulty.difficulty_thresholds, name="difficulty_thresholds"
    ),
    path("candidates/<int:pk>/difficulty/", difficulty.candidate_difficulty, name="candidate_difficulty"),
    # the review team and adjudication
    path("next/", team.next_candidate, name="next"),
    path("benchmarks/<slug:name>/team/", team.team_page, name="team"),
    path("benchmarks/<slug:name>/team/part/<slug:panel>/", team.team_part, name="team_part"),
    path("benchmarks/<slug:name>/team/settings/", team.team_settings, name="team_settings"),
    path("adjudication/", team.adjudication_list, name="adjudication"),
    path("candidates/<int:pk>/adjudicate/", team.adjudicate, name="adjudicate"),
    # diagnosis measures
    path("benchmarks/<slug:name>/diagnosis-precision/", measures.diagnosis_precision, name="diagnosis_precision"),
    path("benchmarks/<slug:name>/planted/", measures.planted, name="planted"),
]
