from django.apps import AppConfig


class TrainingJobsConfig(AppConfig):
    name = "training_jobs"
