"""Proxy session tokens are stored hashed (sha256) and every session expires (issue 10, item 14).

Existing sessions keep working with the tokens their agents hold: each token is replaced by its hash, and an open
session expires CLAWGYM_PROXY_SESSION_TTL_SECONDS after it was created (a long-past one at once)."""

import hashlib
from datetime import timedelta

from django.conf import settings
from django.db import migrations, models


def hash_tokens(apps, schema_editor):
    ProxySession = apps.get_model("llm", "ProxySession")
    ttl = timedelta(seconds=settings.CLAWGYM_PROXY_SESSION_TTL_SECONDS)
    for session in ProxySession.objects.all().only("pk", "token", "created_at", "closed_at"):
        ProxySession.objects.filter(pk=session.pk).update(
            token_hash=hashlib.sha256(session.token.encode("utf-8", "surrogatepass")).hexdigest(),
            expires_at=session.closed_at or session.created_at + ttl,
        )


class Migration(migrations.Migration):
    dependencies = [("llm", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="proxysession",
            name="token_hash",
            field=models.CharField(editable=False, max_length=64, null=True, help_text="sha256 of the token."),
        ),
        migrations.AddField(
            model_name="proxysession",
            name="expires_at",
            field=models.DateTimeField(null=True, help_text="After this its token gets 401 even if nobody closed it."),
        ),
        migrations.RunPython(hash_tokens, migrations.RunPython.noop),
    ]
