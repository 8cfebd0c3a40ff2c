"""python manage.py curriculum build --out DIR [--seed N] [--sizes train=23,heldout=6,unseen_kind=16] [--json]
python manage.py curriculum import [--seed N] [--sizes ...] [--benchmark NAME] [--by ADMIN] [--workers N] [--json]"""

import json

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.validators import validate_slug

from accounts.roles import admin_named

from ...curriculum.build import ID_PREFIX, CurriculumError, curriculum, parse_sizes, write_curriculum


class Command(BaseCommand):
    help = (
        "ClawGym's generated curriculum: small file tasks of 8 kinds a small model can learn, drawn by seed into "
        "the splits train (7 kinds), heldout (new parameters of those kinds) and unseen_kind (the 8th kind). "
        "`build` writes them as ClawGym task folders, DIR/<split>/, with DIR/<split>.txt listing each split's ids "
        "and DIR/manifest.json. `import` imports them into the catalog and freezes the held-out splits as "
        "versions of the benchmarks NAME-heldout and NAME-unseen (each task sanity-checked here first, then "
        "accepted by the admin --by); a second run changes nothing. With --json the last line is one JSON object "
        "(build: the manifest; import: task ids per split, benchmark versions, the train split's --tasks-from)."
    )

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        build = sub.add_parser("build", help="write the task folders")
        build.add_argument("--out", required=True, help="a new or empty folder")
        imported = sub.add_parser("import", help="import the tasks and freeze the held-out benchmarks")
        imported.add_argument(
            "--benchmark",
            default=ID_PREFIX,
            help=f"the benchmarks' name start: NAME-heldout, NAME-unseen (default {ID_PREFIX})",
        )
        imported.add_argument(
            "--by",
            default="admin",
            metavar="USERNAME",
            help="the admin who accepts the tasks and freezes the versions (default admin)",
        )
        imported.add_argument("--workers", type=int, help="sanity checks at a time (default: CPUs)")
        for each in (build, imported):
            each.add_argument("--seed", type=int, default=0, help="draws the tasks (default 0)")
            each.add_argument(
                "--sizes",
                default="",
                metavar="SPLIT=N,...",
                help="tasks per kind by split (default train=23,heldout=6,unseen_kind=16)",
            )
            each.add_argument("--json", dest="as_json", action="store_true", help="print the result as JSON last")

    def handle(self, *args, action, seed, sizes, as_json, **options):
        try:
            drawn = curriculum(seed, parse_sizes(sizes))
            if action == "build":
                result = write_curriculum(drawn, options["out"])
                counts = ", ".join(f"{len(ids)} {split}" for split, ids in result["splits"].items())
                self.stdout.write(f"wrote {counts} tasks (seed {seed}) to {options['out']}")
            else:
                result = self._import(drawn, options)
        except CurriculumError as exc:
            raise CommandError(str(exc)) from None
        if as_json:
            self.stdout.write(json.dumps(result))

    def _import(self, drawn, options) -> dict:
        from ...curriculum.importing import import_curriculum

        user = admin_named(options["by"], error=CommandError)
        try:
            validate_slug(options["benchmark"])
        except ValidationError:
            raise CommandError(f"--benchmark {options['benchmark']!r} must be letters, digits, '-' or '_'") from None
        if options["workers"] is not None and options["workers"] < 1:
            raise CommandError("--workers must be at least 1")
        result = import_curriculum(drawn, user=user, benchmark=options["benchmark"], workers=options["workers"])
        counts = result["import"]
        self.stdout.write(
            f"tasks: {counts['imported']} imported, {counts['updated']} updated, {counts['unchanged']} unchanged"
        )
        for split, found in result["benchmarks"].items():
            state = "frozen now" if found["frozen_now"] else "unchanged"
            self.stdout.write(
                f"{split}: benchmark {found['name']} v{found['number']} ({found['tasks']} tasks, {state})"
            )
        self.stdout.write(
            f"train: {len(result['tasks']['train'])} tasks, `train --kind rl --tasks-from {result['train_selection']}`"
        )
        return result
