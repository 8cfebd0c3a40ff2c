import json
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from accounts.roles import ADMIN, grant_role

from .create_user import checked_password


class Command(BaseCommand):
    help = "Create the admin user if missing and print its login (the password is printed only when it is created)."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")
        parser.add_argument("--password", help="default: a random one, printed once")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, username, password, **options):
        as_json = options["json"]
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        created = user is None
        if password:
            checked_password(password, user or User(username=username))
        if created:
            password = password or secrets.token_urlsafe(12)
            user = User.objects.create_superuser(username=username, email="", password=password)
        elif password:
            user.set_password(password)
            user.save(update_fields=["password"])
        grant_role(user, ADMIN)
        if as_json:
            self.stdout.write(json.dumps({"username": username, "created": created, "password": password}))
        elif created or password:
            self.stdout.write(self.style.SUCCESS(f"Admin login: {username} / {password}"))
        else:
            self.stdout.write(
                f"Admin user {username!r} exists; its password is unchanged "
                f"(reset it with: python manage.py ensure_admin --password NEW)."
            )
