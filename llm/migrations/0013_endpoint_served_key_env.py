from django.db import migrations

import lib.nulsafe

SERVED_KEY_PREFIX = "CLAWGYM_KEY_SERVED_"


def bind_registered_keys(apps, schema_editor):
    """An endpoint ClawGym registered (served_at set) keeps the served key it names now: its registration's."""
    ModelEndpoint = apps.get_model("llm", "ModelEndpoint")
    for endpoint in ModelEndpoint.objects.exclude(served_at="").filter(api_key_env__startswith=SERVED_KEY_PREFIX):
        ModelEndpoint.objects.filter(pk=endpoint.pk).update(served_key_env=endpoint.api_key_env)


class Migration(migrations.Migration):
    dependencies = [
        ("llm", "0012_endpoint_served_at"),
    ]

    operations = [
        migrations.AddField(
            model_name="modelendpoint",
            name="served_key_env",
            field=lib.nulsafe.NulSafeCharField(blank=True, default="", editable=False, max_length=100),
        ),
        migrations.RunPython(bind_registered_keys, migrations.RunPython.noop),
    ]
