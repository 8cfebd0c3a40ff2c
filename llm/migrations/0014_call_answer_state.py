from django.db import migrations, models

import lib.nulsafe


class Migration(migrations.Migration):
    dependencies = [
        ("llm", "0013_endpoint_served_key_env"),
    ]

    operations = [
        migrations.AddField(
            model_name="modelcall",
            name="answer_state",
            field=lib.nulsafe.NulSafeCharField(
                choices=[("recorded", "Recorded"), ("pending", "Not recorded yet"), ("unrecorded", "Not recorded")],
                default="recorded",
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="modelcall",
            name="held_tokens",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="What a proxied call counts against its session's token limit while no usage of its answer "
                "is recorded: the output cap it was forwarded with.",
                null=True,
            ),
        ),
    ]
