"""ModelCallTokens stores its prompt as a reference to an earlier row of its session plus the new ids
(llm.token_chain). Rows written before keep their whole prompt: the old column is renamed, they get no base, and
their prompt_length is filled in from it."""

import django.db.models.deletion
from django.db import migrations, models


def fill_prompt_lengths(apps, schema_editor):
    tokens = apps.get_model("llm", "ModelCallTokens")
    batch = []
    for row in tokens.objects.only("pk", "prompt_suffix_ids").iterator(chunk_size=200):
        row.prompt_length = len(row.prompt_suffix_ids)
        batch.append(row)
        if len(batch) == 200:
            tokens.objects.bulk_update(batch, ["prompt_length"])
            batch = []
    tokens.objects.bulk_update(batch, ["prompt_length"])


class Migration(migrations.Migration):

    dependencies = [
        ('llm', '0006_proxy_sampling_policy'),
    ]

    operations = [
        migrations.RenameField(
            model_name='modelcalltokens',
            old_name='prompt_token_ids',
            new_name='prompt_suffix_ids',
        ),
        migrations.AlterField(
            model_name='modelcalltokens',
            name='prompt_suffix_ids',
            field=models.JSONField(default=list, help_text="The prompt's ids after those shared with the base."),
        ),
        migrations.AddField(
            model_name='modelcalltokens',
            name='prompt_base',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.RESTRICT, related_name='+', to='llm.modelcalltokens'),
        ),
        migrations.AddField(
            model_name='modelcalltokens',
            name='prompt_base_length',
            field=models.PositiveIntegerField(default=0, help_text="Ids of the base's prompt and completion that open this prompt."),
        ),
        migrations.AddField(
            model_name='modelcalltokens',
            name='prompt_length',
            field=models.PositiveIntegerField(default=0, help_text="The whole prompt's length (checked on every rebuild)."),
            preserve_default=False,
        ),
        migrations.RunPython(fill_prompt_lengths, migrations.RunPython.noop),
    ]
