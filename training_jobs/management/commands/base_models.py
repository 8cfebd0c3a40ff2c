"""python manage.py base_models add CONVERTER                 (e.g. smollm2-135m-instruct)
python manage.py base_models add NAME --path FOLDER
python manage.py base_models list [--json]
python manage.py base_models converters"""

import json

from django.core.management.base import BaseCommand, CommandError

from ... import base_models, converters


class Command(BaseCommand):
    help = (
        "Manage the base models runs train from. `add CONVERTER` converts a model shipped in a registry package once "
        "(ON THIS MACHINE, into CLAWGYM_TRAINING_DIR/base-models/, a subprocess; the Base models page queues the "
        "same as a gpu job) and registers it; `add NAME --path FOLDER` registers a folder already here. Both are "
        "idempotent. `list` shows them (--json: one JSON list); `converters` the shipped converters."
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

    def handle(self, *args, action, **options):
        if action == "list":
            return self.list(options["as_json"])
        if action == "converters":
            for c in base_models.converter_choices():
                state = "registered" if c["registered"] else ("ready to add" if c["installed"] else
                                                              f"package {c['package']} not installed")  # fmt: skip
                self.stdout.write(f"{c['name']}\t{c['title']} ({c['license']}, from {c['package']})\t{state}")
            return
        name, path = options["name"], options["path"]
        try:
            if path:
                row, created = base_models.add_by_path(name, path, notes=options["notes"])
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
            self.stdout.write("No base model is registered. Add one: `manage.py base_models add "
                              f"{next(iter(converters.CONVERTERS))}` or `base_models add NAME --path FOLDER`.")  # fmt: skip
        for row in rows:
            missing = "" if row["on_this_machine"] else "  (folder not on this machine)"
            self.stdout.write(f"{row['name']}\t{row['architecture']}\t{row['path']}{missing}")
