from django.apps import AppConfig
from django.db.models.signals import post_migrate


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "People and roles"

    def ready(self):
        from .roles import sync_role_groups

        post_migrate.connect(sync_role_groups, sender=self)
