"""python manage.py model_calls --session TOKEN --json   -> the session's recorded calls as one JSON array, oldest first."""

import json

from django.core.management.base import BaseCommand, CommandError

from llm.models import ModelCall, ProxySession


class Command(BaseCommand):
    help = "Print recorded model calls of a proxy session (or of a subject), oldest first."

    def add_arguments(self, parser):
        parser.add_argument("--session", metavar="TOKEN", help="the proxy session's token")
        parser.add_argument("--subject", help='calls made for this subject, e.g. "rollout:42"')
        parser.add_argument("--json", dest="as_json", action="store_true", help="one JSON array")

    def handle(self, *args, session=None, subject=None, as_json=False, **options):
        if not session and not subject:
            raise CommandError("give --session TOKEN or --subject S")
        calls = ModelCall.objects.select_related("session").order_by("created_at", "id")
        if session:
            found = ProxySession.objects.by_token(session).first()
            if found is None:
                raise CommandError("no proxy session has that token")
            calls = calls.filter(session=found)
        if subject:
            calls = calls.filter(subject=subject)
        rows = [call.as_dict() for call in calls.with_requests()]
        if as_json:
            self.stdout.write(json.dumps(rows, ensure_ascii=False))
            return
        for row in rows:
            outcome = row["error"] or "ok"
            self.stdout.write(f"#{row['id']} {row['created_at']} {row['purpose']} {row['endpoint']}: {outcome}")
        self.stdout.write(f"{len(rows)} call{'s' if len(rows) != 1 else ''}")
