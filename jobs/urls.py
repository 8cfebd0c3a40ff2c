from django.urls import path

from . import views

app_name = "jobs"
urlpatterns = [
    path("", views.job_list, name="list"),
    path("<int:pk>/", views.job_detail, name="detail"),
    path("<int:pk>/progress/", views.job_progress, name="progress"),
    path("<int:pk>/batch/", views.batch_progress, name="batch_progress"),
    path("<int:pk>/cancel/", views.job_cancel, name="cancel"),
]
