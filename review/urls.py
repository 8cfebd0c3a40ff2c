from importlib import import_module

app_name = "review"

urlpatterns = []
for _area in ("queue", "candidate", "solve", "benchmarks", "quality", "propose", "difficulty", "team", "measures"):
    urlpatterns += import_module(f"review.views.{_area}").urlpatterns
