"""The REST API: one router for every app's viewsets."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from accounts.api import obtain_token
from benchmarks.api import register as register_benchmarks
from evaluation.api import register as register_evaluation
from jobs.api import register as register_jobs
from llm.api import register as register_llm
from review.api import register as register_review
from review.measures_api import register as register_review_measures
from review.quality_api import register as register_quality
from review.solve_api import register as register_solve
from studies.api import register as register_studies
from synthesis.api import register as register_synthesis
from tasks.api import register as register_tasks
from training_jobs.api import register as register_training

router = DefaultRouter()
register_tasks(router)
register_jobs(router)
register_llm(router)
register_benchmarks(router)
register_evaluation(router)
register_review(router)
register_review_measures(router)
register_quality(router)
register_solve(router)
register_synthesis(router)
register_training(router)
register_studies(router)

urlpatterns = [
    path("", include(router.urls)),
    path("auth/", include("rest_framework.urls")),
    # POST username + password, get the user's API token (for scripts); failed attempts are rate limited (axes).
    path("auth/token/", obtain_token, name="api-token"),
]
