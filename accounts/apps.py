from django.apps import AppConfig
from django.db.models.signals import post_migrate


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "People and roles"

    def ready(self):
        from .roles import sync_role_groups  # imports auth's models: only once the apps are loaded

        # accounts has no models, so it gets no post_migrate of its own: sync after every app's migration,
        # which also picks up the permissions of apps migrated later. It is idempotent and cheap.
        post_migrate.connect(sync_role_groups, dispatch_uid="accounts.sync_role_groups")
