"""python manage.py proxy_session --endpoint NAME [--subject S] [--ttl SECONDS] --json
    -> {"id": …, "token": …, "base_url": …, "expires_at": …}
python manage.py proxy_session --close TOKEN

Opens a recording session of the proxy: give the agent base_url (and any API key: the token in the URL is the
credential). This is the only time the token is shown: only its hash is stored. The session expires after --ttl
seconds (default CLAWGYM_PROXY_SESSION_TTL_SECONDS) unless closed first. Every call through it is recorded;
`model_calls --session TOKEN` prints them.
"""

import json

from django.core.management.base import BaseCommand, CommandError

from llm.models import ModelEndpoint, ProxySession
from llm.services import close_proxy_session, open_proxy_session, proxy_base_url


class Command(BaseCommand):
    help = "Open (or close) a recording session of the OpenAI-compatible proxy."

    def add_arguments(self, parser):
        parser.add_argument("--endpoint", help="name of the model endpoint the session forwards to")
        parser.add_argument("--subject", default="", help='what the session records, e.g. "rollout:42"')
        parser.add_argument("--ttl", type=float, help="seconds until the token is refused (default: the setting)")
        parser.add_argument("--close", metavar="TOKEN", help="close this session instead: its token then gets 401")
        parser.add_argument("--json", dest="as_json", action="store_true")

    def handle(self, *args, endpoint=None, subject="", ttl=None, close=None, as_json=False, **options):
        if close:
            session = ProxySession.objects.by_token(close).first()
            if session is None:
                raise CommandError("no proxy session has that token")
            close_proxy_session(session)
            self.stdout.write(
                json.dumps({"id": session.pk, "closed": True}) if as_json else f"closed session #{session.pk}"
            )
            return
        if not endpoint:
            raise CommandError("--endpoint NAME is required (or --close TOKEN)")
        found = ModelEndpoint.objects.filter(name=endpoint).first()
        if found is None:
            names = ", ".join(ModelEndpoint.objects.values_list("name", flat=True)) or "none yet"
            raise CommandError(f"no model endpoint named {endpoint!r} (endpoints: {names})")
        try:
            session = open_proxy_session(found, subject=subject, ttl_seconds=ttl)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        info = {
            "id": session.pk,
            "token": session.token,
            "base_url": proxy_base_url(session),
            "expires_at": session.expires_at.isoformat(),
        }
        self.stdout.write(
            json.dumps(info) if as_json else f"base_url {info['base_url']} (expires {info['expires_at']})"
        )
