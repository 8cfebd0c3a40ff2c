"""ModelCall stores its request as a reference to an earlier call of its session plus what is new
(llm.request_chain). Calls recorded before keep their whole request: the column is renamed and they get no base;
their request_chars stays null (readers fall back to the stored JSON's length)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("llm", "0007_token_prompt_chain"),
    ]

    operations = [
        migrations.RenameField(model_name="modelcall", old_name="request", new_name="request_part"),
        migrations.AlterField(
            model_name="modelcall",
            name="request_part",
            field=models.JSONField(
                help_text="The request body as sent upstream, or, with a base, what it adds to its base (llm.request_chain)."
            ),
        ),
        migrations.AddField(
            model_name="modelcall",
            name="request_base",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.RESTRICT,
                related_name="+",
                to="llm.modelcall",
            ),
        ),
        migrations.AddField(
            model_name="modelcall",
            name="request_shared",
            field=models.PositiveIntegerField(
                default=0, help_text="Items of the base's conversation list that open this request's."
            ),
        ),
        migrations.AddField(
            model_name="modelcall",
            name="request_inherited",
            field=models.JSONField(
                blank=True, default=list, help_text="Top-level keys of the request whose value is the base's."
            ),
        ),
        migrations.AddField(
            model_name="modelcall",
            name="request_chars",
            field=models.PositiveIntegerField(
                blank=True,
                null=True,
                help_text="Characters of the whole request as JSON (null: recorded before it was kept).",
            ),
        ),
    ]
