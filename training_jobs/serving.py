"""Serve a checkpoint (or a base model: a registered one, or a run's) as an OpenAI-compatible endpoint and register it
as a ModelEndpoint with the agent role.

Three backends, picked by name (training_jobs.serve_backends; settings.CLAWGYM_SERVE_BACKEND, default "auto": vLLM
where `vllm` is installed and an NVIDIA GPU is visible, else `transformers serve`; "batched", ClawGym's own CPU
server, only when named):

- "vllm" (GPU workers; installed there only, `pip install vllm==0.30.0` after requirements-training.txt). The start
  command, as run:

      vllm serve FOLDER --served-model-name ckpt-RUN-STEP --uds SOCKET --dtype bfloat16 \
          --max-model-len 65536 --enable-auto-tool-choice --tool-call-parser hermes --generation-config vllm

  (hermes is the tool-call parser for Qwen3's <tool_call> format), with the server's key in VLLM_API_KEY.
- "transformers": `transformers serve ckpt-RUN-STEP --uds SOCKET` (through training/transformers_serve.py, which adds
  --uds and turns a tool call that does not parse into the model's text, not a 500) run in a folder where
  ckpt-RUN-STEP is a link to the checkpoint (the `transformers[serving]` extra's packages, pinned in
  requirements-training.txt). The folder given is preloaded and pinned: the server loads it once at start, before it
  answers, and serves nothing else under that name (a request naming another model is refused). Its tool-call parser
  is chosen by the model type: Qwen2/2.5/3 (`<tool_call>{json}</tool_call>`), Qwen3.5, Gemma 4 and the others
  transformers knows, or a tokenizer's own `response_template`.
- "batched": `python -m training.batched_server FOLDER --name ckpt-RUN-STEP --uds SOCKET …` (ClawGym's CPU server:
  calls sampled together, each conversation's cache reused; answers parsed as transformers serve parses them), checking
  the server's key again itself (given in CLAWGYM_POLICY_KEY).

LoRA checkpoints (an adapter, `adapter_config.json`) are merged into the run's base model first, in a subprocess
(`python -m training.trainers.merge_lora`, peft's merge_and_unload; never in the calling process), into a
folder next to the checkpoint named by the checkpoint's sha256, `merged-checkpoint-N-SHA16` (not `checkpoint-*`,
which the trainer's checkpoint rotation and resume look for): a second serve of the same checkpoint reuses it. On
a GPU worker vLLM could instead serve the adapter on the base model itself (`vllm serve BASE --enable-lora
--lora-modules ckpt-RUN-STEP=CHECKPOINT --max-lora-rank R`), with no merged copy on disk; the merged folder is used
for both backends so that the two serve the same weights.

No backend listens on a port: each listens on a Unix socket in a folder made for it alone, which only the worker's
user may open (0700: server_processes.backend_socket), behind its authenticating front (training.serving_front, the
process started: the backend is its child, in its process group), whose port is the only one a server opens. The
front listens on CLAWGYM_SERVE_HOST, answers only requests carrying the server's key, passes on only the OpenAI
routes (never transformers serve's /load_model and /reset, nor vLLM's routes outside /v1, which its --api-key does
not guard) and bounds bodies (CLAWGYM_SERVE_MAX_REQUEST_BYTES). The key is the server's own: its endpoint names it
CLAWGYM_KEY_SERVED_S<server id> as api_key_env, and every process that calls the endpoint derives it from SECRET_KEY
(llm.models.served_key); nothing stores it, and it goes only to the address the server was registered at
(ModelEndpoint.served_at). The front, its backend, a LoRA merge
get the worker's environment by an allow-list (training_jobs.child_env: no SECRET_KEY, DATABASE_URL or model keys).

Every server, a checkpoint's or a base model's (`base-NAME` for a registered one, its row naming it; `base-RUN` for a
run's own; checkpoint empty, model_path the base's folder), is a ModelServer row and a subprocess in a session of its
own (it outlives the command or job that started it; a thread of the process that started it waits for it, so that it
is reaped whoever stops it); it counts as up once GET /v1/models answers with its key. The pages and the API never
start one themselves: request_serving(checkpoint or base model) records a "starting" row and queues the
`training.serve_checkpoint` job (gpu queue), which merges, starts the server on its worker, waits for the health check
and marks the row ready (or failed, with the error). `manage.py serve_checkpoint` and `base_models serve` serve on the
machine they run on and wait. A server listens on CLAWGYM_SERVE_HOST (127.0.0.1: one machine) and its endpoint's
base_url names CLAWGYM_SERVE_ADVERTISE_HOST, or the machine's name when it listens on 0.0.0.0, as the RL policy server
does: the proxy may run on another machine. It is stopped by `serve_checkpoint --stop ENDPOINT`, by stop_serving()
(the Base models page's Stop) or when idle: `stop_idle_servers()` stops ready servers whose endpoint had no model call
for CLAWGYM_SERVE_IDLE_SECONDS (30 min), and marks stopped those that no longer answer; every SFT run job calls it
when it starts, and the scheduler queues it as the `training.stop_idle_servers` job (gpu queue, jobs/periodic.py),
which also kills what still runs on its machine of a server stopped from another (the web app's container stops the
row; the process is the gpu worker's).
"""

import json
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from jobs.engine import JobEngineError
from llm.models import SERVED_KEY_PREFIX, ModelCall, ModelEndpoint, served_key

from .child_env import child_env
from .folders import run_dir, training_root
from .job_kinds import SERVE_JOB, STOP_IDLE_SERVERS_JOB
from .models import BaseModel, Checkpoint, ModelServer
from .serve_backends import ServingError, default_backend, serve_backend
from .server_processes import (
    alive,
    answers,
    backend_socket,
    free_port,
    kill_group,
    launch,
    owned_pid,
    remove_backend_socket,
    served_command,
)

STOPPED_ELSEWHERE_SECONDS = 86400  # how far back the sweep looks for processes of servers stopped on another machine
HEALTH_TIMEOUT_SECONDS = 600.0  # vLLM loading an 8B model and capturing CUDA graphs takes minutes
MERGE_TIMEOUT_SECONDS = 3600.0  # merging LoRA into an 8B base on CPU reads and writes ~16 GB


def endpoint_name(checkpoint: Checkpoint) -> str:
    return f"ckpt-{checkpoint.run_id}-{checkpoint.step}"


def base_endpoint_name(base_model: BaseModel) -> str:
    return f"base-{base_model.name}"


def served_name(server: ModelServer) -> str:
    """The endpoint a checkpoint's or registered base model's server registers."""
    if server.checkpoint_id:
        return endpoint_name(server.checkpoint)
    return base_endpoint_name(server.base_model)


def key_env(server: ModelServer) -> str:
    """The variable name the server's endpoint gives as api_key_env: its key is derived from it (served_key)."""
    return f"{SERVED_KEY_PREFIX}S{server.pk}"


def server_key(server: ModelServer) -> str:
    return served_key(key_env(server))


def serve_host() -> str:
    return settings.CLAWGYM_SERVE_HOST


def advertised_host(bind: str) -> str:
    """The host the endpoint's base_url names: where the proxy, perhaps on another machine, connects."""
    configured = settings.CLAWGYM_SERVE_ADVERTISE_HOST
    if configured:
        return configured
    if bind in ("0.0.0.0", ""):  # every interface: the proxy elsewhere reaches it by the machine's name
        return socket.getfqdn()
    return bind


def serve_checkpoint(
    checkpoint: Checkpoint,
    *,
    backend: str | None = None,
    host: str | None = None,
    port: int | None = None,
    timeout: float = HEALTH_TIMEOUT_SECONDS,
) -> ModelServer:
    """Start a server for the checkpoint here (a LoRA one merged first), wait until it answers, register its endpoint
    (the command; the pages queue training.serve_checkpoint instead). A checkpoint already served (its server ready
    and its process alive) is not started twice."""
    running = _running(checkpoint.servers.all())
    if running:
        return running
    server = ModelServer.objects.create(checkpoint=checkpoint, backend=backend or "", last_used_at=timezone.now())
    return start_server(server, host=host, port=port, timeout=timeout)


def start_server(
    server: ModelServer, *, host: str | None = None, port: int | None = None, timeout: float = HEALTH_TIMEOUT_SECONDS
) -> ModelServer:
    """Bring a checkpoint's or a registered base model's "starting" row up on this machine: merge a LoRA adapter,
    launch, health-check, register. The row ends ready, or failed with the error (raised as ServingError)."""
    try:
        if server.checkpoint_id:
            path, log_dir = servable_path(server.checkpoint), Path(server.checkpoint.path).parent
        else:
            path, log_dir = server.base_model.path, base_model_log_dir(server.base_model)
            if not Path(path).is_dir():
                raise ServingError(f"the base model {server.base_model.name}'s folder {path} is not on this machine")
            log_dir.mkdir(parents=True, exist_ok=True)
    except (ServingError, OSError) as exc:
        _failed(server, exc)
        raise ServingError(str(exc)) from exc
    return _launch_server(server, path, served_name(server), host=host, port=port, timeout=timeout, log_dir=log_dir)


def serve_base_model(
    run, *, backend: str | None = None, host: str | None = None, timeout: float = HEALTH_TIMEOUT_SECONDS
) -> ModelServer:
    """The run's base model served as endpoint "base-RUN" (the baseline of its checkpoints), a ModelServer row with
    no checkpoint, so that it is stopped by name or when idle like a checkpoint's."""
    return serve_folder(
        run.base_model_path, f"base-{run.pk}", run_dir(run), backend=backend, host=host, timeout=timeout
    )


def serve_registered_base_model(
    base_model: BaseModel,
    *,
    backend: str | None = None,
    host: str | None = None,
    port: int | None = None,
    timeout: float = HEALTH_TIMEOUT_SECONDS,
) -> ModelServer:
    """A registered base model served here as endpoint "base-NAME" (`base_models serve NAME`; the page queues
    request_serving instead): what its checkpoints are compared against, evaluated before any run exists. One
    ready and answering is not started twice."""
    running = _running(base_model.servers.all())
    if running:
        return running
    server = ModelServer.objects.create(
        base_model=base_model, model_path=base_model.path, backend=backend or "", last_used_at=timezone.now()
    )
    return start_server(server, host=host, port=port, timeout=timeout)


def base_model_log_dir(base_model: BaseModel) -> Path:
    return training_root() / "served-base-models" / base_model.name


def serve_folder(
    path: str,
    name: str,
    log_dir: Path,
    *,
    backend: str | None = None,
    host: str | None = None,
    port: int | None = None,
    timeout: float = HEALTH_TIMEOUT_SECONDS,
) -> ModelServer:
    """A model folder served as endpoint NAME (a ModelServer row with no checkpoint), unless it is served already."""
    running = _running(ModelServer.objects.filter(checkpoint=None, endpoint__name=name, model_path=path))
    if running:
        return running
    log_dir.mkdir(parents=True, exist_ok=True)
    server = ModelServer.objects.create(
        checkpoint=None, model_path=path, backend=backend or "", last_used_at=timezone.now()
    )
    return _launch_server(server, path, name, host=host, port=port, timeout=timeout, log_dir=log_dir)


def _running(servers) -> ModelServer | None:
    for server in servers.filter(status=ModelServer.Status.READY).select_related("endpoint"):
        if alive(server.pid) and answers(_base_url(server), server_key(server)):
            _tie_endpoint(server)
            return server
    return None


def _tie_endpoint(server: ModelServer) -> None:
    """The server's endpoint sent its own key at the server's own address (ModelEndpoint.served_at and
    served_key_env): an endpoint registered before those existed, or one changed since, points at its server again."""
    url = _base_url(server)
    if server.endpoint_id:
        name = key_env(server)
        ModelEndpoint.objects.filter(pk=server.endpoint_id).exclude(
            served_at=url, base_url=url, api_key_env=name, served_key_env=name
        ).update(base_url=url, served_at=url, api_key_env=name, served_key_env=name)


def _launch_server(server: ModelServer, path: str, name: str, *, host, port, timeout, log_dir: Path) -> ModelServer:
    bind = host or serve_host()
    try:
        backend = server.backend or default_backend()
        port = port or free_port(bind)
        cwd = serve_backend(backend).workdir(log_dir / "served", name, path)
        command = served_command(backend, path, name, bind, port, backend_socket(), cwd)
    except (ServingError, OSError) as exc:
        _failed(server, exc)
        raise ServingError(str(exc)) from exc
    ModelServer.objects.filter(pk=server.pk).update(
        model_path=path, backend=backend, host=advertised_host(bind), port=port, command=command
    )
    server.refresh_from_db()
    log_path = log_dir / f"serve-{name}-{port}.log"
    try:
        pid = launch(
            command,
            _base_url(server),
            log_path,
            timeout=timeout,
            key=server_key(server),
            backend=backend,
            on_start=lambda pid: ModelServer.objects.filter(pk=server.pk).update(pid=pid),
        )
    except ServingError as exc:
        remove_backend_socket(command)
        _failed(server, exc)
        raise
    endpoint = register_endpoint(name, _base_url(server), backend, key_env(server))
    # Only a row still starting becomes ready: one stopped while it loaded keeps its status, and its process goes.
    ready = ModelServer.objects.filter(pk=server.pk, status=ModelServer.Status.STARTING).update(
        status=ModelServer.Status.READY, endpoint=endpoint, pid=pid, last_used_at=timezone.now()
    )
    if not ready:
        kill_group(pid)
        ModelEndpoint.objects.filter(pk=endpoint.pk).update(enabled=False)
    server.refresh_from_db()
    return server


def _failed(server: ModelServer, error) -> None:
    # Only a starting row: one stopped meanwhile stays stopped.
    ModelServer.objects.filter(pk=server.pk, status=ModelServer.Status.STARTING).update(
        status=ModelServer.Status.FAILED, stopped_at=timezone.now(), error=str(error)
    )


def request_serving(subject: Checkpoint | BaseModel, *, user) -> ModelServer:
    """Queue the server of a checkpoint or a registered base model on a gpu worker (the training.serve_checkpoint job)
    and return its row, still "starting", at once. One with a server starting, or ready and answering, gets that one
    back."""
    from jobs import enqueue

    if isinstance(subject, Checkpoint):
        fields, about = {"checkpoint": subject}, {"run_id": subject.run_id}
    else:
        fields, about = {"base_model": subject, "model_path": subject.path}, {"base_model": subject.name}
    server = None
    try:
        with transaction.atomic():
            # Two requests at once: the second waits for the first's row (PostgreSQL; SQLite writes one at a time).
            type(subject).objects.select_for_update().filter(pk=subject.pk).first()
            current = current_server(subject)
            if current is not None:
                return current
            server = ModelServer.objects.create(**fields, last_used_at=timezone.now())
            job_run = enqueue(SERVE_JOB, created_by=user, server_id=server.pk, **about)
            ModelServer.objects.filter(pk=server.pk).update(job_run=job_run)
    except JobEngineError as exc:  # raised as the block commits: the row exists, and says why nothing starts it
        if server is not None:
            _failed(server, f"the job engine did not take the job: {exc}")
        raise
    server.refresh_from_db()
    return server


def current_server(subject: Checkpoint | BaseModel) -> ModelServer | None:
    """The checkpoint's (or base model's) server that is starting (its job not finished), or ready and answering.
    Rows whose job ended without them coming up are marked failed, and ready ones that no longer answer stopped, on
    the way."""
    servers = subject.servers.filter(status__in=[ModelServer.Status.STARTING, ModelServer.Status.READY])
    for server in servers.select_related("job_run", "endpoint"):
        if server.status == ModelServer.Status.READY:
            if answers(_base_url(server), server_key(server)):
                return server
            stop_server(server, reason="it stopped answering")
        elif server.job_run is not None and server.job_run.is_finished:
            job_run = server.job_run
            _failed(
                server,
                f"its job #{job_run.pk} ended {job_run.status} before the server answered: "
                f"{job_run.error or 'no error given'}",
            )
        elif server.job_run is None and timezone.now() - server.created_at > timedelta(
            seconds=MERGE_TIMEOUT_SECONDS + HEALTH_TIMEOUT_SECONDS
        ):
            _failed(server, "started by a command that never finished")
        else:
            return server
    return None


def start_requested_server(server_id: int, *, progress) -> dict:
    """Start the row's server (a checkpoint's or a registered base model's, as request_serving recorded it) on this
    machine and return its report once it answers; it outlives the caller (a session of its own). A row no longer
    starting is left as it is; one whose earlier attempt died mid-start (the worker killed) starts afresh, its
    leftover process here killed first. progress(done, total, message) as a job's context takes it."""
    server = ModelServer.objects.select_related("checkpoint__run", "base_model").filter(pk=server_id).first()
    if server is None or (server.checkpoint is None and server.base_model is None):
        raise ServingError(f"no checkpoint or base model server #{server_id}")
    if server.status != ModelServer.Status.STARTING:
        return {**server_report(server), "note": f"{server.status}: nothing to do"}
    kill_group(owned_pid(server))
    ModelServer.objects.filter(pk=server.pk, status=ModelServer.Status.STARTING).update(pid=None, error="")
    is_lora = server.checkpoint is not None and (Path(server.checkpoint.path) / "adapter_config.json").exists()
    progress(
        0,
        1,
        f"merging the LoRA adapter, then starting {served_name(server)}"
        if is_lora
        else f"starting {served_name(server)}",
    )
    try:
        server = start_server(server)
    except ServingError:
        server.refresh_from_db()
        if server.status == ModelServer.Status.STOPPED:  # stopped while it loaded: what was asked, no failure
            return {**server_report(server), "note": "stopped while it started"}
        raise
    progress(1, 1, f"{server.status}: {server.endpoint.base_url if server.endpoint else ''}")
    return server_report(server)


def server_report(server: ModelServer) -> dict:
    endpoint = server.endpoint
    return {
        "server": server.pk,
        "status": server.status,
        "endpoint": endpoint.name if endpoint else None,
        "base_url": endpoint.base_url if endpoint else None,
    }


def servable_path(checkpoint: Checkpoint, *, timeout: float = MERGE_TIMEOUT_SECONDS) -> str:
    """The folder to serve: the checkpoint's own, or for a LoRA adapter the merged model beside it (merged once per
    checkpoint content: the folder is named by its sha256)."""
    path = Path(checkpoint.path)
    if not (path / "adapter_config.json").exists():
        return str(path)
    if not checkpoint.sha256:
        raise ServingError(f"checkpoint #{checkpoint.pk} has no sha256 to name its merged model by")
    merged = path.parent / f"merged-{path.name}-{checkpoint.sha256[:16]}"
    if merged.is_dir():
        return str(merged)
    run = checkpoint.run
    config = {
        "base_model_path": run.base_model_path,
        "yarn": run.config.get("yarn") or {},
        "bf16": bool(run.config.get("bf16")),
        "cpu": run.cpu,
    }
    command = [sys.executable, "-m", "training.trainers.merge_lora", str(path), str(merged), json.dumps(config)]
    env = child_env(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    try:
        done = subprocess.run(
            command,
            cwd=settings.BASE_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise ServingError(
            f"merging the LoRA adapter {path} into {run.base_model_path} took over {timeout:g} s"
        ) from None
    if done.returncode != 0 or not merged.is_dir():
        raise ServingError(
            f"merging the LoRA adapter {path} into {run.base_model_path} failed (exit "
            f"{done.returncode}):\n{(done.stderr or done.stdout)[-2000:]}"
        )
    return str(merged)


def register_endpoint(name: str, base_url: str, backend: str, api_key_env: str) -> ModelEndpoint:
    """The served model's agent endpoint: made with the served output cap in its sampling (kept as an admin or a
    script changed it when the same name is served again)."""
    defaults = {
        "base_url": base_url,
        "model": name,
        "roles": [ModelEndpoint.Role.AGENT],
        "enabled": True,
        "api_key_env": api_key_env,
        "served_at": base_url,  # the server's key goes to this address only (ModelEndpoint.served_key_refusal)
        "served_key_env": api_key_env,  # and this endpoint may name no other server's key
        "max_concurrent": serve_backend(backend).streams(),
        "timeout_seconds": serve_backend(backend).request_timeout(),
    }
    endpoint, _ = ModelEndpoint.objects.update_or_create(
        name=name,
        defaults=defaults,
        create_defaults={**defaults, "sampling": {"max_tokens": settings.CLAWGYM_SERVED_MAX_TOKENS}},
    )
    return endpoint


def stop_server(server: ModelServer, *, reason: str = "stopped") -> ModelServer:
    """Kill the server's process group when it runs on this machine (see server_processes.owned_pid) and mark the
    row stopped, its endpoint disabled."""
    owned = owned_pid(server)
    if owned:
        kill_group(owned)
    # Killed here, or died without its front removing its socket (a process killed a moment ago may still be
    # exiting, so whether it is alive says nothing): a server marked stopped is served by nothing, and on a machine
    # that never ran it there is no such folder.
    remove_backend_socket(server.command)
    ModelServer.objects.filter(pk=server.pk).update(
        status=ModelServer.Status.STOPPED, stopped_at=timezone.now(), error=reason if reason != "stopped" else ""
    )
    if server.endpoint_id:
        ModelEndpoint.objects.filter(pk=server.endpoint_id).update(enabled=False)
    server.refresh_from_db()
    return server


def stop_serving(subject: Checkpoint | BaseModel, *, user) -> list[ModelServer]:
    """Stop the checkpoint's (or base model's) servers that are starting or ready (the Base models page's Stop), as
    `user` asked: the rows stopped and their endpoints disabled at once. A process on another machine (a gpu
    worker's, the web app stopping it) is killed there: a starting one by its own job as it comes up (the row is no
    longer starting), a ready one by the next idle sweep on that machine, queued now in the user's name."""
    from jobs import enqueue

    servers = list(subject.servers.filter(status__in=[ModelServer.Status.STARTING, ModelServer.Status.READY]))
    elsewhere = [s for s in servers if s.status == ModelServer.Status.READY and s.pid and owned_pid(s) is None]
    stopped = [stop_server(server) for server in servers]
    if elsewhere:
        try:
            enqueue(STOP_IDLE_SERVERS_JOB, created_by=user)
        except JobEngineError:
            pass  # the scheduler's sweep (jobs/periodic.py) kills it on its next tick instead
    return stopped


def stop_endpoint(name: str) -> list[ModelServer]:
    """Stop every server of the endpoint (a checkpoint's or a base model's) and disable the endpoint."""
    servers = ModelServer.objects.filter(endpoint__name=name).exclude(status=ModelServer.Status.STOPPED)
    if not servers.exists() and not ModelEndpoint.objects.filter(name=name).exists():
        raise ServingError(f"no served model endpoint named {name!r}")
    stopped = [stop_server(server) for server in servers]
    ModelEndpoint.objects.filter(name=name).update(enabled=False)
    return stopped


def stop_idle_servers(now=None, idle_seconds: float | None = None) -> list[int]:
    """Stop ready servers (checkpoints' and base models') whose endpoint had no model call through the proxy for
    idle_seconds, and ready ones that no longer answer; their ids. Cheap enough to run every minute: a health check
    and one aggregate per ready server. Only servers of the machine it runs on are killed (the pid is checked
    against the process's command line): run it on each machine that serves (every SFT job on a gpu worker does).
    """
    now = now or timezone.now()
    idle = timedelta(seconds=idle_seconds if idle_seconds is not None else settings.CLAWGYM_SERVE_IDLE_SECONDS)
    stopped = []
    for server in ModelServer.objects.filter(status=ModelServer.Status.READY):
        if not answers(_base_url(server), server_key(server)):
            stop_server(server, reason="it stopped answering")
            stopped.append(server.pk)
            continue
        _tie_endpoint(server)
        if server.pid and owned_pid(server) is None:
            continue  # a server of another machine (its pid means nothing here): that machine's sweep stops it
        last_call = ModelCall.objects.filter(endpoint_id=server.endpoint_id).aggregate(last=Max("created_at"))["last"]
        last = max(t for t in (server.last_used_at, last_call, server.created_at) if t is not None)
        if last_call and (server.last_used_at is None or last_call > server.last_used_at):
            ModelServer.objects.filter(pk=server.pk).update(last_used_at=last_call)
        if now - last >= idle:
            stop_server(server, reason=f"idle since {last:%Y-%m-%d %H:%M:%S} UTC")
            stopped.append(server.pk)
    return stopped


def kill_stopped_here(now=None) -> list[int]:
    """Kill the processes still running on this machine of servers stopped recently from another (the web app's
    Stop: its container cannot signal the gpu worker's process); their ids."""
    now = now or timezone.now()
    recent = ModelServer.objects.filter(
        status=ModelServer.Status.STOPPED,
        pid__isnull=False,
        stopped_at__gte=now - timedelta(seconds=STOPPED_ELSEWHERE_SECONDS),
    )
    killed = []
    for server in recent:
        pid = owned_pid(server)
        if pid is not None:
            kill_group(pid)
            remove_backend_socket(server.command)
            killed.append(server.pk)
    return killed


def _base_url(server: ModelServer) -> str:
    return f"http://{server.host}:{server.port}/v1"
