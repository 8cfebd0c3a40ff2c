"""python manage.py rollout_files ROLLOUT_ID OUTDIR: write a rollout's final workspace to a folder."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from ...models import Rollout
from ...workspaces import write_final_workspace


class Command(BaseCommand):
    help = (
        "Write the final workspace of a rollout (its task's input files with the rollout's changes applied) to "
        "OUTDIR, which must not exist or be empty. Files whose contents were too large to keep, and special "
        "files, are listed but not written."
    )

    def add_arguments(self, parser):
        parser.add_argument("rollout_id", type=int)
        parser.add_argument("outdir")

    def handle(self, *args, rollout_id, outdir, **options):
        rollout = Rollout.objects.select_related("revision").filter(pk=rollout_id).first()
        if rollout is None:
            raise CommandError(f"no rollout #{rollout_id}")
        if rollout.status != Rollout.Status.SCORED:
            raise CommandError(
                f"rollout #{rollout_id} is {rollout.status}: only scored rollouts have a final workspace"
            )
        target = Path(outdir)
        if target.exists() and (not target.is_dir() or any(target.iterdir())):
            raise CommandError(f"{target} exists and is not an empty folder")
        written, skipped = write_final_workspace(rollout, target)
        for entry in skipped:
            self.stderr.write(f"not written: {entry.path} ({entry.get_kind_display().lower()}, {entry.size} B)")
        self.stdout.write(f"wrote {written} files of rollout #{rollout_id} to {target}")
