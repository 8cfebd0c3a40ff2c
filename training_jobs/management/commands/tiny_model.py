"""python manage.py tiny_model OUT [--seed 0] [--json]"""

import json

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = (
        "Build a tiny Qwen3-architecture model and its tokenizer (trained here; TRL's Qwen3 training chat template, "
        "which renders tool calls and carries the generation markers) into OUT: the training path without "
        'downloading weights. With --json the last line is {"path"}.'
    )

    def add_arguments(self, parser):
        parser.add_argument("out", metavar="OUT", help="the folder to write (created)")
        parser.add_argument("--seed", type=int, default=0, help="seeds the weights (0)")
        parser.add_argument("--json", dest="as_json", action="store_true", help='print {"path"} as JSON last')

    def handle(self, *args, **flags):
        from training.tiny_model import tiny_model

        path = tiny_model(flags["out"], seed=flags["seed"]).resolve()
        if flags["as_json"]:
            self.stdout.write(json.dumps({"path": str(path)}))
        else:
            self.stdout.write(f"tiny model and tokenizer written to {path}")
