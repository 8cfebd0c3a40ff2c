"""Load the seeds ClawGym ships: the personas we wrote (synthesis/data/personas.jsonl) and the atomic operations
(synthesis/data/operations.yaml). Both stay editable in the admin; reversing leaves them (they may have been
edited or used by then)."""

from django.db import migrations


def load(apps, schema_editor):
    from synthesis.seed_files import load_operations, load_shipped_personas

    load_operations(
        OperationCategory=apps.get_model("synthesis", "OperationCategory"),
        AtomicOperation=apps.get_model("synthesis", "AtomicOperation"),
    )
    load_shipped_personas(Persona=apps.get_model("synthesis", "Persona"))


class Migration(migrations.Migration):
    dependencies = [("synthesis", "0002_skill_skipped_files_annotation_error")]

    operations = [migrations.RunPython(load, migrations.RunPython.noop)]
