"""Training pages, under /training/ (clawgym_site.urls includes them as the "training" namespace)."""

from django.urls import path  # noqa: F401  (the dataset and run pages add their paths here)

app_name = "training"
urlpatterns = []
