"""python manage.py endpoints add NAME --base-url URL --model ID [--api chat|responses] [--api-key-env VAR] [--role R ...]
    [--update: change only the flags given]
python manage.py endpoints list [--json]

The API key is never given here: --api-key-env names the environment variable that holds it.
"""

import json
from decimal import Decimal, InvalidOperation

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from llm.models import ModelEndpoint
from llm.services import create_endpoint, update_endpoint


def _json_object(raw: str) -> dict:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise CommandError(f"--sampling must be a JSON object: {exc}") from None
    if not isinstance(value, dict):
        raise CommandError("--sampling must be a JSON object, e.g. '{\"temperature\": 0.2}'")
    return value


def _price(raw: str) -> Decimal:
    try:
        return Decimal(raw)
    except InvalidOperation:
        raise CommandError(f"a price must be a number (dollars per million tokens), got {raw!r}") from None


class Command(BaseCommand):
    help = "Add, update or list model endpoints (for scripts)."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        add = sub.add_parser("add", help="add an endpoint (or change it, with --update: only the flags given change)")
        add.add_argument("name")
        # Defaults are None here: with --update a flag left out keeps the endpoint's value; a new one gets the model's.
        add.add_argument("--base-url", help="up to and including /v1 (required for a new endpoint)")
        add.add_argument("--model", help="the model id the API expects (required for a new endpoint)")
        add.add_argument("--api", choices=ModelEndpoint.ApiStyle.values, help="chat (default) or responses")
        add.add_argument("--api-key-env", help="name of the environment variable holding the key")
        add.add_argument(
            "--role",
            action="extend",
            nargs="+",
            choices=ModelEndpoint.Role.values,
            help="the roles it may serve (--role judge diagnosis, or repeated); with --update they replace its roles",
        )
        add.add_argument("--no-roles", action="store_true", help="with --update: take every role away")
        add.add_argument("--timeout", type=float, help="seconds per attempt (120)")
        add.add_argument("--retries", type=int, help="attempts after the first (3)")
        add.add_argument("--max-concurrent", type=int, help="calls at once (4)")
        add.add_argument("--sampling", type=_json_object, help="default settings as a JSON object")
        add.add_argument("--price-in", type=_price, help="$ per million input tokens (0)")
        add.add_argument("--price-out", type=_price, help="$ per million output tokens (0)")
        enabled = add.add_mutually_exclusive_group()
        enabled.add_argument("--disabled", dest="enabled", action="store_false", default=None, help="turn it off")
        enabled.add_argument("--enabled", dest="enabled", action="store_true", help="turn it on (a new one is on)")
        add.add_argument("--update", action="store_true", help="change the endpoint if it exists")
        add.add_argument("--json", dest="as_json", action="store_true")
        listing = sub.add_parser("list", help="list endpoints")
        listing.add_argument("--json", dest="as_json", action="store_true", help="one JSON array")

    def handle(self, *args, action, as_json=False, **options):
        if action == "list":
            return self._list(as_json)
        return self._add(as_json, **options)

    def _list(self, as_json: bool):
        endpoints = [e.as_dict() for e in ModelEndpoint.objects.all()]
        if as_json:
            self.stdout.write(json.dumps(endpoints))
            return
        if not endpoints:
            self.stdout.write("no model endpoints")
        for e in endpoints:
            roles = ",".join(e["roles"]) or "-"
            state = "" if e["enabled"] else " (disabled)"
            self.stdout.write(f"{e['name']}{state}: {e['model']} at {e['base_url']} [{e['api_style']}] roles {roles}")

    def _add(self, as_json: bool, *, name, update, **options):
        given = {
            "base_url": options["base_url"],
            "model": options["model"],
            "api_style": options["api"],
            "api_key_env": options["api_key_env"],
            "roles": [] if options["no_roles"] else sorted(set(options["role"])) if options["role"] else None,
            "timeout_seconds": options["timeout"],
            "max_retries": options["retries"],
            "max_concurrent": options["max_concurrent"],
            "sampling": options["sampling"],
            "price_input_per_mtok": options["price_in"],
            "price_output_per_mtok": options["price_out"],
            "enabled": options["enabled"],
        }
        given = {field: value for field, value in given.items() if value is not None}
        existing = ModelEndpoint.objects.filter(name=name).first()
        if existing and not update:
            raise CommandError(f"an endpoint named {name!r} exists; add --update to change it")
        if existing:  # only what was given changes, and only what differs is said to have
            fields = {field: value for field, value in given.items() if getattr(existing, field) != value}
        else:
            missing = [flag for flag, field in (("--base-url", "base_url"), ("--model", "model")) if field not in given]
            if missing:
                raise CommandError(f"a new endpoint needs {' and '.join(missing)}")
            fields = given
        try:
            endpoint = update_endpoint(existing, **fields) if existing else create_endpoint(name, **fields)
        except ValidationError as exc:
            problems = "; ".join(f"{field}: {' '.join(errors)}" for field, errors in exc.message_dict.items())
            raise CommandError(f"invalid endpoint: {problems}") from None
        if as_json:
            self.stdout.write(json.dumps(endpoint.as_dict()))
        else:
            self.stdout.write(self.style.SUCCESS(f"{'updated' if existing else 'added'} endpoint {endpoint.name}"))
