"""The serving backends, by name: the model server a checkpoint's or base model's front starts behind it.

    backend = serve_backend("vllm")            # ServingError naming the known ones for an unknown name
    backend.command(path, name, socket_path)   # the server's own command, on a Unix socket and no port
    backend.streams(), backend.request_timeout(), backend.env(key), backend.workdir(folder, name, path)

Three implementations, as sandbox backends and harnesses are: `vllm` (GPU workers), `transformers` (`transformers
serve` with ClawGym's tool-call fix, training/transformers_serve.py) and `batched` (ClawGym's own CPU server,
training.batched_server). CLAWGYM_SERVE_BACKEND names one, or `auto`: vLLM where it and a GPU are there,
transformers otherwise (default_backend). A new backend is a subclass registered in BACKENDS; nothing else compares
backend names.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

from django.conf import settings

from llm.models import ModelEndpoint
from training import transformers_serve as tolerant_serve

# Rows the batched server samples together (and calls its endpoint sends at once): 16 gave SmolLM2-135M 80 tokens/s
# on 2 cores against 65 for 8 (training.batched_sampling).
BATCHED_STREAMS = 16


class ServingError(RuntimeError):
    pass


class ServeBackend:
    """One kind of model server. Subclasses set `name` and give `command`; the rest has defaults."""

    name = ""

    def command(self, path: str, name: str, socket_path: str) -> list[str]:
        """The server's own command, serving the model at `path` as `name` on the Unix socket `socket_path` and on no
        port (it runs behind the front: training_jobs.server_processes.served_command)."""
        raise NotImplementedError

    def workdir(self, folder: Path, name: str, path: str) -> Path:
        """The folder the server runs in (the project's, unless the backend needs one of its own)."""
        return Path(settings.BASE_DIR)

    def env(self, key: str) -> dict[str, str]:
        """Variables the server needs besides the allow-listed environment (its own copy of the key, for one)."""
        return {}

    def streams(self) -> int:
        """How many requests the registered endpoint sends the server at once."""
        return 8

    def request_timeout(self) -> float:
        """The registered endpoint's timeout per model call."""
        return ModelEndpoint._meta.get_field("timeout_seconds").default

    def available(self) -> bool:
        """Whether this machine can run it (what `auto` asks)."""
        return True


class Vllm(ServeBackend):
    """vLLM's OpenAI server, on GPU workers: batches every request it is sent."""

    name = "vllm"

    def command(self, path, name, socket_path):
        return [
            "vllm",
            "serve",
            path,
            "--served-model-name",
            name,
            "--uds",  # vLLM's OpenAI server: with a socket, it binds no host or port
            socket_path,
            "--dtype",
            "bfloat16",
            "--max-model-len",
            "65536",
            "--enable-auto-tool-choice",
            "--tool-call-parser",
            "hermes",
            "--generation-config",
            "vllm",
        ]

    def env(self, key):
        return {"VLLM_API_KEY": key}  # its --api-key guards /v1 again behind the front

    def available(self):
        return bool(shutil.which("vllm") and shutil.which("nvidia-smi"))


class Transformers(ServeBackend):
    """`transformers serve`, given NAME: a link to PATH in the folder it runs in, since it names the model by the
    folder it was given (model_link). The folder preloads and pins the model (loaded once, never unloaded when idle)."""

    name = "transformers"

    def command(self, path, name, socket_path):
        command = [*transformers_serve(), name, "--uds", socket_path, "--log-level", "info"]
        if settings.CLAWGYM_SERVE_CONTINUOUS_BATCHING:
            command.append("--continuous-batching")  # concurrent agents' calls batched: see bench/serve_bench.py
            if not shutil.which("nvidia-smi"):
                # Without a GPU the paged KV cache takes its share of the machine's free RAM (transformers' default is
                # 90%: 11.5 GB for a 135M model here, and a second server gets what is left).
                command += ["--cb-max-memory-percent", str(settings.CLAWGYM_SERVE_CPU_KV_MEMORY_SHARE)]
        return command

    def workdir(self, folder, name, path):
        return model_link(folder, name, path)

    def streams(self):
        """Continuous batching gives 2.8x the tokens/s at 8 streams on SmolLM2-135M (bench/serve_bench.py); without
        it the server answers one request at a time."""
        return 8 if settings.CLAWGYM_SERVE_CONTINUOUS_BATCHING else 1

    def request_timeout(self):
        """A local server on CPU answers its streams in turn (a call can wait behind seven others of 192 tokens
        each), and it does not stop generating when the client gives up, so a short timeout turns a slow answer into
        the same work queued twice: wait long (CLAWGYM_SERVE_REQUEST_TIMEOUT_SECONDS)."""
        return float(settings.CLAWGYM_SERVE_REQUEST_TIMEOUT_SECONDS)


class Batched(Transformers):
    """ClawGym's own CPU server (training.batched_server): samples up to BATCHED_STREAMS rows together."""

    name = "batched"

    def command(self, path, name, socket_path):
        return [
            sys.executable,
            "-m",
            "training.batched_server",
            path,
            "--name",
            name,
            "--uds",
            socket_path,
            "--max-batch",
            str(BATCHED_STREAMS),
        ]

    def workdir(self, folder, name, path):
        return Path(settings.BASE_DIR)

    def env(self, key):
        return {"CLAWGYM_POLICY_KEY": key}  # it checks the key again behind the front

    def streams(self):
        return BATCHED_STREAMS


BACKENDS: dict[str, ServeBackend] = {backend.name: backend for backend in (Vllm(), Transformers(), Batched())}


def serve_backend(name: str) -> ServeBackend:
    """The backend of that name; ServingError naming the known ones otherwise."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise ServingError(f"unknown serving backend {name!r}; known: {', '.join(BACKENDS)}") from None


def default_backend() -> str:
    """CLAWGYM_SERVE_BACKEND's backend: `auto` is vLLM where it can run, transformers otherwise."""
    name = settings.CLAWGYM_SERVE_BACKEND
    if name == "auto":
        return BACKENDS["vllm"].name if BACKENDS["vllm"].available() else BACKENDS["transformers"].name
    if name not in BACKENDS:
        raise ServingError(
            f"unknown serving backend {name!r} in CLAWGYM_SERVE_BACKEND; known: {', '.join(BACKENDS)}, auto"
        )
    return name


def transformers_serve() -> list[str]:
    """`transformers serve` as ClawGym runs it (training/transformers_serve.py: a tool call that does not parse is the
    model's text, not a 500), by the interpreter running us, by path (-P: nothing of ClawGym on its sys.path)."""
    if importlib.util.find_spec("transformers.cli.serving") is None:
        raise ServingError(
            f"no `transformers serve` for {sys.executable}: install requirements-training.txt "
            "(transformers with its [serving] extra's packages)"
        )
    return [sys.executable, "-P", tolerant_serve.__file__, "serve"]


def model_link(folder: Path, name: str, path: str) -> Path:
    """folder/NAME → PATH: run in `folder`, transformers serve loads NAME (a local path) and calls the model NAME, so
    requests name the endpoint's model as they do with vLLM's --served-model-name."""
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / name
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(Path(path).resolve(), target_is_directory=True)
    return folder
