"""The plaintext token column goes (0002 stored its hash); the hash and the expiry are required from now on.
The key variable's help names the CLAWGYM_KEY_ fence (item 16)."""

import llm.models
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("llm", "0002_proxy_session_token_hash")]

    operations = [
        migrations.AlterField(
            model_name="modelendpoint",
            name="api_key_env",
            field=models.CharField(
                blank=True,
                help_text="Name of the environment variable holding the API key, CLAWGYM_KEY_… (blank: the server needs none).",
                max_length=100,
                validators=[llm.models.validate_env_name],
            ),
        ),
        migrations.RemoveField(model_name="proxysession", name="token"),
        migrations.AlterField(
            model_name="proxysession",
            name="token_hash",
            field=models.CharField(
                default=llm.models.unheld_token_hash, editable=False, help_text="sha256 of the token.", max_length=64,
                unique=True,
            ),
        ),
        migrations.AlterField(
            model_name="proxysession",
            name="expires_at",
            field=models.DateTimeField(
                default=llm.models.default_session_expiry,
                help_text="After this its token gets 401 even if nobody closed it.",
            ),
        ),
    ]
