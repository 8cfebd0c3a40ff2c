from django.urls import path

from . import views

app_name = "studies"
urlpatterns = [
    path("", views.study_list, name="list"),
    path("start/", views.study_start, name="start"),
    path("<int:pk>/", views.study_detail, name="detail"),
    path("<int:pk>/cancel/", views.study_cancel, name="cancel"),
]
