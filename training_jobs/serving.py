"""Serve a checkpoint as an OpenAI-compatible endpoint and register it as a ModelEndpoint with the agent role.

Two backends, picked by name (settings.CLAWGYM_SERVE_BACKEND, default "auto": vLLM where `vllm` is installed and
an NVIDIA GPU is visible, else the CPU server):

- "vllm" (GPU workers; installed there only, `pip install vllm==0.30.0` after requirements-training.txt). The start
  command, as run:

      vllm serve CHECKPOINT --served-model-name ckpt-RUN-STEP --host HOST --port PORT --dtype bfloat16 \
          --max-model-len 65536 --enable-auto-tool-choice --tool-call-parser hermes --generation-config vllm

  (hermes is the tool-call parser for Qwen3's <tool_call> format.)
- "transformers": `python -m training_jobs.serving_cpu CHECKPOINT --served-model-name NAME --host H --port P`, our
  own small server around transformers' generate. `transformers serve` (5.24) needs FastAPI, the
  `transformers[serving]` extra, which the training pins do not install; see serving_cpu's docstring.

The server is a subprocess in a session of its own (it outlives the command that started it); it counts as up once
GET /v1/models answers. It is stopped by `serve_checkpoint --stop ENDPOINT` or when idle: `stop_idle_servers`
stops ready servers whose endpoint had no model call for CLAWGYM_SERVE_IDLE_SECONDS (30 min); every SFT run job
calls it when it starts, and the `training.stop_idle_servers` job (gpu queue) can be scheduled to run it.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from jobs.registry import job
from llm.models import ModelCall, ModelEndpoint

from .models import Checkpoint, ModelServer

HEALTH_TIMEOUT_SECONDS = 600.0  # vLLM loading an 8B model and capturing CUDA graphs takes minutes


class ServingError(RuntimeError):
    pass


def backend_name() -> str:
    name = getattr(settings, "CLAWGYM_SERVE_BACKEND", "auto")
    if name == "auto":
        return "vllm" if shutil.which("vllm") and shutil.which("nvidia-smi") else "transformers"
    if name not in ("vllm", "transformers"):
        raise ServingError(f"unknown serving backend {name!r}; choose vllm, transformers or auto")
    return name


def endpoint_name(checkpoint: Checkpoint) -> str:
    return f"ckpt-{checkpoint.run_id}-{checkpoint.step}"


def start_command(backend: str, path: str, name: str, host: str, port: int) -> list[str]:
    if backend == "vllm":
        return ["vllm", "serve", path, "--served-model-name", name, "--host", host, "--port", str(port),
                "--dtype", "bfloat16", "--max-model-len", "65536", "--enable-auto-tool-choice",
                "--tool-call-parser", "hermes", "--generation-config", "vllm"]  # fmt: skip
    return [sys.executable, "-m", "training_jobs.serving_cpu", path, "--served-model-name", name, "--host", host,
            "--port", str(port)]  # fmt: skip


def free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def serve_checkpoint(checkpoint: Checkpoint, *, backend: str | None = None, host: str = "127.0.0.1",
                     port: int | None = None, timeout: float = HEALTH_TIMEOUT_SECONDS) -> ModelServer:  # fmt: skip
    """Start a server for the checkpoint, wait until it answers, register its endpoint. A checkpoint already served
    (its server ready and its process alive) is not started twice."""
    running = checkpoint.servers.filter(status=ModelServer.Status.READY).select_related("endpoint").first()
    if running and _alive(running.pid) and _answers(_base_url(running)):
        return running
    if (Path(checkpoint.path) / "adapter_config.json").exists():
        raise ServingError(f"checkpoint {checkpoint.path} holds a LoRA adapter: serving adapters (merged into the "
                           "base, or vLLM --enable-lora) is not implemented yet")  # fmt: skip
    backend = backend or backend_name()
    port = port or free_port(host)
    name = endpoint_name(checkpoint)
    command = start_command(backend, checkpoint.path, name, host, port)
    server = ModelServer.objects.create(checkpoint=checkpoint, backend=backend, host=host, port=port,
                                        command=command, last_used_at=timezone.now())  # fmt: skip
    log_path = Path(checkpoint.path).parent / f"serve-{name}-{port}.log"
    try:
        pid = launch(command, _base_url(server), log_path, timeout=timeout,
                     on_start=lambda pid: ModelServer.objects.filter(pk=server.pk).update(pid=pid))  # fmt: skip
    except ServingError as exc:
        ModelServer.objects.filter(pk=server.pk).update(status=ModelServer.Status.FAILED, stopped_at=timezone.now(),
                                                        error=str(exc))  # fmt: skip
        raise
    endpoint = register_endpoint(name, _base_url(server), backend)
    ModelServer.objects.filter(pk=server.pk).update(status=ModelServer.Status.READY, endpoint=endpoint, pid=pid)
    server.refresh_from_db()
    return server


def serve_base_model(run, *, backend: str | None = None, host: str = "127.0.0.1",
                     timeout: float = HEALTH_TIMEOUT_SECONDS) -> ModelEndpoint:  # fmt: skip
    """The run's base model served as endpoint "base-RUN" (the baseline of its checkpoints). No ModelServer row
    (that table is per checkpoint): its pid is written beside the run's files, and `--stop base-RUN` reads it."""
    from .run_jobs import run_dir

    backend = backend or backend_name()
    name, port = f"base-{run.pk}", free_port(host)
    base_url = f"http://{host}:{port}/v1"
    folder = run_dir(run)
    folder.mkdir(parents=True, exist_ok=True)
    pid = launch(start_command(backend, run.base_model_path, name, host, port), base_url,
                 folder / f"serve-{name}.log", timeout=timeout)  # fmt: skip
    (folder / f"{name}.pid").write_text(str(pid))
    return register_endpoint(name, base_url, backend)


def launch(command: list[str], base_url: str, log_path: Path, *, timeout: float, on_start=None) -> int:
    """Start the server in a session of its own; its pid once GET /v1/models answers (ServingError otherwise)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    with log_path.open("ab") as log:
        proc = subprocess.Popen(command, cwd=settings.BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    if on_start:
        on_start(proc.pid)
    deadline = time.monotonic() + timeout
    while not _answers(base_url):
        if proc.poll() is not None or time.monotonic() > deadline:
            why = f"exited with {proc.returncode}" if proc.poll() is not None else f"did not answer in {timeout:g} s"
            _kill(proc.pid)
            tail = log_path.read_text(errors="replace")[-2000:] if log_path.exists() else ""
            raise ServingError(f"the server `{' '.join(command[:4])} …` {why} (log: {log_path})\n{tail}")
        time.sleep(0.5)
    return proc.pid


def register_endpoint(name: str, base_url: str, backend: str) -> ModelEndpoint:
    endpoint, _ = ModelEndpoint.objects.update_or_create(
        name=name,
        defaults={"base_url": base_url, "model": name, "roles": [ModelEndpoint.Role.AGENT], "enabled": True,
                  "api_key_env": "", "max_concurrent": 1 if backend == "transformers" else 8},
    )  # fmt: skip
    return endpoint


def stop_server(server: ModelServer, *, reason: str = "stopped") -> ModelServer:
    _kill(server.pid)
    ModelServer.objects.filter(pk=server.pk).update(status=ModelServer.Status.STOPPED, stopped_at=timezone.now(),
                                                    error=reason if reason != "stopped" else "")  # fmt: skip
    if server.endpoint_id:
        ModelEndpoint.objects.filter(pk=server.endpoint_id).update(enabled=False)
    server.refresh_from_db()
    return server


def stop_endpoint(name: str) -> list[ModelServer]:
    servers = ModelServer.objects.filter(endpoint__name=name).exclude(status=ModelServer.Status.STOPPED)
    if name.startswith("base-") and name[5:].isdigit():
        from .models import TrainingRun
        from .run_jobs import run_dir

        run = TrainingRun.objects.filter(pk=int(name[5:])).first()
        pid_file = run_dir(run) / f"{name}.pid" if run else None
        if pid_file and pid_file.exists():
            _kill(int(pid_file.read_text()))
            pid_file.unlink()
    if not servers.exists() and not ModelEndpoint.objects.filter(name=name).exists():
        raise ServingError(f"no served checkpoint endpoint named {name!r}")
    stopped = [stop_server(server) for server in servers]
    ModelEndpoint.objects.filter(name=name).update(enabled=False)
    return stopped


def stop_idle_servers(now=None, idle_seconds: float | None = None) -> list[int]:
    """Stop ready servers whose endpoint had no model call (through the proxy) for idle_seconds; their ids."""
    now = now or timezone.now()
    idle = timedelta(seconds=idle_seconds if idle_seconds is not None else
                     getattr(settings, "CLAWGYM_SERVE_IDLE_SECONDS", 1800))  # fmt: skip
    stopped = []
    for server in ModelServer.objects.filter(status=ModelServer.Status.READY):
        last_call = ModelCall.objects.filter(endpoint_id=server.endpoint_id).values_list("created_at", flat=True).first()
        last = max(t for t in (server.last_used_at, last_call, server.created_at) if t is not None)
        if last_call and (server.last_used_at is None or last_call > server.last_used_at):
            ModelServer.objects.filter(pk=server.pk).update(last_used_at=last_call)
        if now - last >= idle:
            stop_server(server, reason=f"idle since {last:%Y-%m-%d %H:%M:%S} UTC")
            stopped.append(server.pk)
    return stopped


@job("training.stop_idle_servers", queue="gpu", title="Stop idle checkpoint servers")
def stop_idle_servers_job(ctx) -> dict:
    return {"stopped": stop_idle_servers()}


def _base_url(server: ModelServer) -> str:
    return f"http://{server.host}:{server.port}/v1"


def _answers(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=2) as response:
            return response.status == 200 and "data" in json.loads(response.read() or b"{}")
    except (OSError, ValueError):
        return False


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill(pid: int | None) -> None:
    if not pid:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        for _ in range(50):
            if not _alive(pid):
                return
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            time.sleep(0.1)
