from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token

from accounts.roles import ORDER, grant_role


class Command(BaseCommand):
    help = "Create or update a user with a role (viewer, reviewer, admin); optionally print an API token."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--role", choices=ORDER, required=True)
        parser.add_argument("--password")
        parser.add_argument("--token", action="store_true", help="print the user's API token")

    def handle(self, *args, username, role, password, token, **options):
        User = get_user_model()
        user, created = User.objects.get_or_create(username=username)
        if password:
            user.set_password(password)
            user.save()
        elif created:
            user.set_unusable_password()
            user.save()
        try:
            grant_role(user, role)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"{'Created' if created else 'Updated'} {username} with role {role}.")
        if token:
            self.stdout.write(Token.objects.get_or_create(user=user)[0].key)
