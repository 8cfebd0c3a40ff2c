from django.apps import AppConfig


class SynthesisConfig(AppConfig):
    name = "synthesis"
