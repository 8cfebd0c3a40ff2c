from django.contrib.auth import get_user_model, password_validation
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from rest_framework.authtoken.models import Token

from accounts.roles import ORDER, grant_role


def checked_password(password: str, user) -> str:
    """`password` if it passes the project's AUTH_PASSWORD_VALIDATORS for `user`, else CommandError saying why."""
    try:
        password_validation.validate_password(password, user=user)
    except ValidationError as exc:
        raise CommandError("the password is refused: " + " ".join(exc.messages)) from None
    return password


def checked_username(username: str, User) -> str:
    """The username if the user model accepts it (its validator and length), else CommandError saying why."""
    field = User._meta.get_field(User.USERNAME_FIELD)
    try:
        field.run_validators(username)
        if not username.strip():
            raise ValidationError("The username is empty.")
    except ValidationError as exc:
        raise CommandError("the username is refused: " + " ".join(exc.messages)) from None
    return username


class Command(BaseCommand):
    help = "Create or update a user with a role (viewer, reviewer, lead, admin); optionally print an API token."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--role", choices=ORDER, required=True)
        parser.add_argument(
            "--password", help="checked by the project's password validators (AUTH_PASSWORD_VALIDATORS)"
        )
        parser.add_argument("--token", action="store_true", help="print the user's API token")

    def handle(self, *args, username, role, password, token, **options):
        User = get_user_model()
        with transaction.atomic():  # a refused password leaves no half-made user behind
            user = User.objects.filter(username=username).first()
            created = user is None
            if created:
                user = User(username=checked_username(username, User))
            if password:
                user.set_password(checked_password(password, user))
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
