"""python manage.py demo_models [--host 127.0.0.1] [--port 0] [--json]
python manage.py demo_models --disable [--json]
python manage.py demo_models --setup [--json]"""

import json
import signal

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db.models import Q

from accounts.roles import ADMIN
from demo import server
from demo.services import (
    DEMO_BENCHMARK,
    DEMO_ENDPOINTS,
    DemoSetupError,
    disable_demo_endpoints,
    register_demo_endpoints,
    setup_demo_benchmark,
)


class Command(BaseCommand):
    help = (
        "Serve the demo models (scripted, no real model: two agents of different skill, a judge and a generator that "
        "answers every synthesis stage) on one local OpenAI-compatible server until stopped (Ctrl-C or SIGTERM), "
        f"with their endpoints ({', '.join(DEMO_ENDPOINTS)}) registered at its address and enabled. When it stops "
        "they are disabled. `make demo` runs it beside the web app and worker. --disable only disables them. "
        f"--setup serves nothing: it makes the demo benchmark ({DEMO_BENCHMARK}: the example tasks sanity-checked, "
        "accepted and frozen) and the demo reviewers, once (a rerun does only what is missing), and prints their "
        'logins. With --json, one line: {"base_url", "endpoints"} once it serves; with --setup, the setup\'s '
        "outcome."
    )

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=0, help="port to listen on (default 0: a free one)")
        parser.add_argument("--disable", action="store_true", help="disable the demo endpoints, serve nothing")
        parser.add_argument(
            "--setup",
            action="store_true",
            help="set up the demo benchmark and reviewers (needs an admin), serve nothing",
        )
        parser.add_argument("--json", dest="as_json", action="store_true")

    def handle(self, *args, host, port, disable, setup, as_json, **options):
        if setup:
            return self.setup(as_json)
        if disable:
            names = [e.name for e in disable_demo_endpoints()]
            self.stdout.write(json.dumps({"disabled": names}) if as_json else f"disabled: {', '.join(names) or 'none'}")
            return
        try:
            sock = server.bind(host, port)
        except OSError as exc:
            raise CommandError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
        base_url = f"http://{host}:{sock.getsockname()[1]}/v1"
        # uvicorn stops on SIGINT and SIGTERM, then raises the signal again for the handler it found: this one, so
        # that SIGTERM (run.sh's stop, systemd, docker stop) ends here too, with the endpoints disabled.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, _stopped)
        try:
            endpoints = register_demo_endpoints(base_url)
            if as_json:
                self.stdout.write(json.dumps({"base_url": base_url, "endpoints": [e.as_dict() for e in endpoints]}))
            else:
                names = ", ".join(e.name for e in endpoints)
                self.stdout.write(f"Demo models on {base_url}: {names} (Ctrl-C stops them)")
            self.stdout.flush()
            server.serve(sock)
        finally:
            disabled = disable_demo_endpoints(base_url=base_url)
            self.stderr.write(f"demo models stopped; disabled {', '.join(e.name for e in disabled) or 'nothing'}")

    def setup(self, as_json):
        admins = get_user_model().objects.filter(Q(is_superuser=True) | Q(groups__name=ADMIN), is_active=True)
        admin = admins.order_by("pk").first()
        try:
            done = setup_demo_benchmark(user=admin)
        except DemoSetupError as exc:
            raise CommandError(str(exc)) from None
        if as_json:
            self.stdout.write(json.dumps(done.as_dict()))
            return
        tasks = done.version.revisions.count()
        made = "frozen now" if done.version_created else "frozen before"
        self.stdout.write(f"Demo benchmark {done.benchmark.name} v{done.version.number}: {tasks} tasks ({made})")
        for account in done.reviewers:
            login = account["password"] or "(password changed since; unchanged)"
            self.stdout.write(self.style.SUCCESS(f"Demo reviewer login: {account['username']} / {login}"))


def _stopped(signum, frame):
    raise SystemExit(0)
