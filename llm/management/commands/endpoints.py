"""python manage.py endpoints add NAME --base-url URL --model ID [--api chat|responses] [--api-key-env VAR] [--role R ...]
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
        add = sub.add_parser("add", help="add an endpoint (or change it, with --update)")
        add.add_argument("name")
        add.add_argument("--base-url", required=True, help="up to and including /v1")
        add.add_argument("--model", required=True, help="the model id the API expects")
        add.add_argument("--api", choices=ModelEndpoint.ApiStyle.values, default=ModelEndpoint.ApiStyle.CHAT)
        add.add_argument("--api-key-env", default="", help="name of the environment variable holding the key")
        add.add_argument(
            "--role",
            action="append",
            choices=ModelEndpoint.Role.values,
            default=[],
            help="a role it may serve; repeat for several",
        )
        add.add_argument("--timeout", type=float, default=120.0, help="seconds per attempt")
        add.add_argument("--retries", type=int, default=3)
        add.add_argument("--max-concurrent", type=int, default=4)
        add.add_argument("--sampling", type=_json_object, default={}, help="default settings as a JSON object")
        add.add_argument("--price-in", type=_price, default=Decimal(0), help="$ per million input tokens")
        add.add_argument("--price-out", type=_price, default=Decimal(0), help="$ per million output tokens")
        add.add_argument("--disabled", action="store_true")
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
        fields = {
            "base_url": options["base_url"],
            "model": options["model"],
            "api_style": options["api"],
            "api_key_env": options["api_key_env"],
            "roles": sorted(set(options["role"])),
            "timeout_seconds": options["timeout"],
            "max_retries": options["retries"],
            "max_concurrent": options["max_concurrent"],
            "sampling": options["sampling"],
            "price_input_per_mtok": options["price_in"],
            "price_output_per_mtok": options["price_out"],
            "enabled": not options["disabled"],
        }
        existing = ModelEndpoint.objects.filter(name=name).first()
        if existing and not update:
            raise CommandError(f"an endpoint named {name!r} exists; add --update to change it")
        try:
            endpoint = update_endpoint(existing, **fields) if existing else create_endpoint(name, **fields)
        except ValidationError as exc:
            problems = "; ".join(f"{field}: {' '.join(errors)}" for field, errors in exc.message_dict.items())
            raise CommandError(f"invalid endpoint: {problems}") from None
        if as_json:
            self.stdout.write(json.dumps(endpoint.as_dict()))
        else:
            self.stdout.write(self.style.SUCCESS(f"{'updated' if existing else 'added'} endpoint {endpoint.name}"))
