from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from evaluation.urls import run_urlpatterns
from ops.views import healthz, metrics
from tasks.views import dashboard

urlpatterns = [
    path("", dashboard, name="dashboard"),
    path("tasks/", include("tasks.urls")),
    path("jobs/", include("jobs.urls")),
    path("llm/", include("llm.urls")),
    path("proxy/", include("llm.proxy_urls")),
    path("rollouts/", include("evaluation.urls")),
    path("evaluations/", include((run_urlpatterns, "evaluations"))),
    path("review/", include("review.urls")),
    path("synthesis/", include("synthesis.urls")),
    path("training/", include("training_jobs.urls")),
    path("studies/", include("studies.urls")),
    path("api/", include("clawgym_site.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),  # no sign-in: load balancers and compose healthchecks
    path("metrics", metrics, name="metrics"),  # Prometheus; loopback or CLAWGYM_METRICS_TOKEN (ops.views)
    # Pages of our own link the icon; the admin, the API docs and the browsable API ask browsers for /favicon.ico.
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
]
