from importlib import import_module

app_name = "review"

urlpatterns = []
for _area in ("queue", "candidate", "benchmarks", "quality", "propose", "difficulty"):
    urlpatterns += import_module(f"review.views.{_area}").urlpatterns
