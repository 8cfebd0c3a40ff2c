"""python manage.py serve_checkpoint CHECKPOINT_ID [--backend vllm|transformers|batched] [--json]
python manage.py serve_checkpoint --stop ENDPOINT"""

import json

from django.core.management.base import BaseCommand, CommandError

from ...models import Checkpoint
from ...serving import HEALTH_TIMEOUT_SECONDS, ServingError, serve_checkpoint, stop_endpoint


class Command(BaseCommand):
    help = (
        "Serve a checkpoint as an OpenAI-compatible endpoint ON THIS MACHINE (vLLM where there is a GPU, `transformers "
        "serve` without one; a LoRA checkpoint merged into its base first), wait until GET /v1/models answers, and "
        "register it as "
        'a ModelEndpoint with the agent role ("ckpt-RUN-STEP"). With --json the last line is {"endpoint", '
        '"base_url"}. The run page and the API queue the training.serve_checkpoint job instead, which does the same '
        "on a gpu worker. --stop ENDPOINT stops the servers of an endpoint (a checkpoint's or a base model's, "
        '"base-RUN") and disables it.'
    )

    def add_arguments(self, parser):
        parser.add_argument("checkpoint", nargs="?", type=int, help="the checkpoint's id")
        parser.add_argument("--stop", metavar="ENDPOINT", help="stop the server of this endpoint, disable it")
        parser.add_argument("--backend", choices=["vllm", "transformers", "batched"], help="default: settings (auto)")
        parser.add_argument("--host", help="the address to listen on (default: CLAWGYM_SERVE_HOST, 127.0.0.1)")
        parser.add_argument("--port", type=int, help="default: a free one")
        parser.add_argument("--timeout", type=float, default=HEALTH_TIMEOUT_SECONDS, help="seconds to answer")
        parser.add_argument("--json", dest="as_json", action="store_true")

    def handle(self, *args, checkpoint, stop, backend, host, port, timeout, as_json, **_options):
        try:
            if stop:
                stopped = stop_endpoint(stop)
                self.stdout.write(f"{stop}: stopped {len(stopped)} server(s); the endpoint is disabled")
                return
            if checkpoint is None:
                raise CommandError("give a CHECKPOINT_ID (or --stop ENDPOINT)")
            found = Checkpoint.objects.filter(pk=checkpoint).first()
            if found is None:
                raise CommandError(f"no checkpoint #{checkpoint}")
            server = serve_checkpoint(found, backend=backend, host=host, port=port, timeout=timeout)
        except ServingError as exc:
            raise CommandError(str(exc)) from None
        report = {"endpoint": server.endpoint.name, "base_url": server.endpoint.base_url}
        if as_json:
            self.stdout.write(json.dumps(report))
        else:
            self.stdout.write(f"{report['endpoint']}: {report['base_url']} ({server.backend}, pid {server.pid})")
