"""Checkpoints served with `transformers serve` (the CPU backend) or ClawGym's batched server, registered as agent endpoints, and a builtin-harness
rollout run against one through the recording proxy; LoRA checkpoints merged into their base first; the base model's
server managed like a checkpoint's; stopped by the command and by the idle sweep.

The rollout's model is the tiny Qwen3 taught here (a hundred optimizer steps on this one task's conversation:
write summary.txt with one tool call, then say it is done), then (for `transformers serve`) trained one SFT step
through the real `accelerate launch` path: so the test can demand what a random tiny model never does, that the
server's tool-call parser turns the model's `<tool_call>` output into an OpenAI tool call the agent executes, and the
task scores 1.
"""

import importlib.util
import json
import os
import signal
import urllib.error
import urllib.request
from io import StringIO
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.core.management import call_command

from evaluation.models import Rollout
from evaluation.services.rollouts import create_rollouts, execute_rollout
from evaluation.testing import INSTRUCTION, RIGHT_SUMMARY, needs_bwrap
from llm.models import ModelCall, ModelEndpoint
from training_jobs.models import Checkpoint, ModelServer
from training_jobs.run_jobs import execute_training
from training_jobs.services.runs import start_training_run
from training_jobs.serving import serve_base_model, stop_idle_servers

# once: trainer runs and model servers, nothing about the database engine (CI runs them in the PostgreSQL pass).
pytestmark = [
    needs_bwrap,
    pytest.mark.once,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("training_dir"),
]

BUILTIN_AGENT = Path(settings.BASE_DIR) / "evaluation" / "harnesses" / "inside" / "builtin_agent.py"
DONE = "Done: summary.txt says 3 apples, 2 pears."


def builtin_agent():
    spec = importlib.util.spec_from_file_location("builtin_agent", BUILTIN_AGENT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fruit_conversation(workspace: str, tool_result: str) -> list[dict]:
    agent = builtin_agent()
    call = {
        "id": "call_0",
        "type": "function",
        "function": {"name": "write", "arguments": json.dumps({"path": "summary.txt", "content": RIGHT_SUMMARY})},
    }
    return [
        {"role": "system", "content": agent.SYSTEM_PROMPT.format(workspace=workspace)},
        {"role": "user", "content": INSTRUCTION},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_0", "content": tool_result},
        {"role": "assistant", "content": DONE},
    ]


@pytest.fixture(scope="session")
def fruit_model(tiny_model_path, tmp_path_factory):
    """The tiny model taught the fruit task's two assistant turns (loss on them only, as SFT would), whatever the
    workspace path in the system prompt and the write tool's reply."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from training.masks import tokenize_sample

    out = tmp_path_factory.mktemp("fruit-model")
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, local_files_only=True, dtype=torch.float32)
    tools = builtin_agent().TOOLS
    samples = [
        tokenize_sample({"messages": fruit_conversation(workspace, result), "tools": tools}, tokenizer)
        for workspace in ("/workspace", "/root/.openclaw/workspace", "/tmp/ws", "/home/agent/work")
        for result in ("ok", "wrote 18 bytes to summary.txt", "written: summary.txt (18 bytes)")
    ]
    torch.manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3)
    model.train()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a 100K-parameter model: more threads only wait on each other (8x slower on 2 busy cores)
    try:
        for step in range(120):
            sample = samples[step % len(samples)]
            labels = [t if m else -100 for t, m in zip(sample["input_ids"], sample["assistant_masks"])]
            loss = model(input_ids=torch.tensor([sample["input_ids"]]), labels=torch.tensor([labels])).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    finally:
        torch.set_num_threads(threads)
    assert loss.item() < 0.05, f"the tiny model did not learn the fruit conversation (loss {loss.item():.3f})"
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return str(out)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def chat(endpoint: ModelEndpoint, messages: list[dict]) -> dict:
    body = {"model": endpoint.model, "messages": messages, "tools": builtin_agent().TOOLS, "max_tokens": 80}
    headers = {"content-type": "application/json", "authorization": f"Bearer {endpoint.api_key()}"}  # the server's own
    request = urllib.request.Request(
        f"{endpoint.base_url}/chat/completions", data=json.dumps(body).encode(), headers=headers, method="POST"
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


def trained_checkpoint(dataset, base: str, **overrides) -> Checkpoint:
    # lr 1e-6: the SFT step goes through the real trainer without unteaching the fruit conversation.
    run = start_training_run(
        kind="sft",
        dataset=dataset,
        base_model_path=base,
        preset="tiny-cpu",
        cpu=True,
        overrides={"max_steps": 1, "learning_rate": 1e-6, **overrides},
        enqueue=False,
        user=None,
    )
    execute_training(run.pk)
    return Checkpoint.objects.get(run=run)


def serve(checkpoint: Checkpoint, backend: str = "transformers") -> dict:
    out = StringIO()
    call_command("serve_checkpoint", str(checkpoint.pk), "--backend", backend, "--json", stdout=out)
    return json.loads(out.getvalue().strip().splitlines()[-1])


def test_a_served_checkpoint_runs_a_rollout_through_the_proxy(
    live_server_asgi,
    fruit_task,
    dataset,
    fruit_model,
):
    checkpoint = trained_checkpoint(dataset, fruit_model)
    report = serve(checkpoint)
    assert report["endpoint"] == f"ckpt-{checkpoint.run_id}-1" and report["base_url"].startswith("http://127.0.0.1:")
    server = ModelServer.objects.get(checkpoint=checkpoint)
    endpoint = ModelEndpoint.objects.get(name=report["endpoint"])
    assert server.status == "ready" and server.endpoint == endpoint and endpoint.roles == ["agent"]
    # Its authenticating front, starting `transformers serve` behind it; the endpoint names the server's own key.
    backend = server.command[server.command.index("--") + 1 :]
    assert server.command[1:3] == ["-m", "training.serving_front"]
    assert endpoint.api_key_env == f"CLAWGYM_KEY_SERVED_S{server.pk}"
    assert backend[2].endswith("/training/transformers_serve.py") and backend[3:5] == ["serve", endpoint.name]
    assert endpoint.model == endpoint.name and server.model_path == checkpoint.path and alive(server.pid)
    # Continuous batching on CPU: eight streams at once, a KV cache of a tenth of the free RAM, a long timeout (the
    # server finishes what a client gave up on).
    assert "--continuous-batching" in backend and backend[backend.index("--cb-max-memory-percent") + 1] == "0.1"
    assert (endpoint.max_concurrent, endpoint.timeout_seconds) == (8, 1800.0)
    link = Path(checkpoint.path).parent / "served" / endpoint.name  # what the server loads, under the endpoint's name
    assert link.resolve() == Path(checkpoint.path).resolve()
    try:
        assert serve(checkpoint) == report and ModelServer.objects.filter(checkpoint=checkpoint).count() == 1

        [rollout] = create_rollouts(fruit_task, endpoint, harness="builtin", options={"max_turns": 3}, user=None)
        rollout = execute_rollout(rollout.pk)
        assert (rollout.status, rollout.exit_reason) == (Rollout.Status.SCORED, "completed"), (
            rollout.status,
            rollout.exit_reason,
            rollout.error,
            rollout.log_tail,
        )
        # The server parsed the model's <tool_call> into a tool call, the agent wrote the file, then answered.
        assert rollout.tools_used == {"write": 1} and rollout.final_message == DONE and rollout.score == 1.0
        calls = ModelCall.objects.filter(session=rollout.proxy_session, endpoint=endpoint).order_by("created_at")
        assert rollout.model_calls == calls.count() == 2 and all(call.status_code == 200 for call in calls)
        [tool_call] = calls[0].response["choices"][0]["message"]["tool_calls"]
        assert tool_call["function"]["name"] == "write"
        assert json.loads(tool_call["function"]["arguments"]) == {"path": "summary.txt", "content": RIGHT_SUMMARY}
        assert calls[0].response["choices"][0]["finish_reason"] == "tool_calls"

        assert stop_idle_servers(idle_seconds=3600) == []  # just used: kept
    finally:
        call_command("serve_checkpoint", "--stop", endpoint.name, stdout=StringIO())
    server.refresh_from_db()
    endpoint.refresh_from_db()
    assert server.status == "stopped" and not endpoint.enabled and not alive(server.pid)


def checkpoint_on(dataset, folder) -> Checkpoint:
    """A checkpoint row of an SFT run (never started) on a saved model folder: enough to serve it."""
    run = start_training_run(
        kind="sft", dataset=dataset, base_model_path=folder, preset="tiny-cpu", cpu=True, enqueue=False, user=None
    )
    return Checkpoint.objects.create(run=run, step=1, path=folder)


def test_the_batched_backend_serves_it_behind_the_front_with_its_key(
    live_server_asgi,
    fruit_task,
    dataset,
    fruit_model,
):
    # A checkpoint row on the taught model's folder: the trainer's path to a served checkpoint is the test above's,
    # what this one proves is the other backend behind the front.
    checkpoint = checkpoint_on(dataset, fruit_model)
    report = serve(checkpoint, "batched")
    server = ModelServer.objects.get(checkpoint=checkpoint)
    endpoint = ModelEndpoint.objects.get(name=report["endpoint"])
    backend = server.command[server.command.index("--") + 1 :]
    assert server.backend == "batched" and server.command[1:3] == ["-m", "training.serving_front"]
    assert backend[1:4] == ["-m", "training.batched_server", checkpoint.path]
    assert backend[backend.index("--name") + 1] == endpoint.name == endpoint.model
    # Sixteen streams sampled together, the CPU server's long timeout.
    assert (endpoint.max_concurrent, endpoint.timeout_seconds) == (16, 1800.0)
    socket_path = server.command[server.command.index("--upstream-socket") + 1]
    try:
        # Behind the front, on its socket, the server checks the key again: a caller without it gets nothing.
        with httpx.Client(transport=httpx.HTTPTransport(uds=socket_path), timeout=30) as backend:
            assert backend.get("http://model-server/v1/models").status_code == 401
        [rollout] = create_rollouts(fruit_task, endpoint, harness="builtin", options={"max_turns": 3}, user=None)
        rollout = execute_rollout(rollout.pk)
        assert (rollout.status, rollout.exit_reason) == (Rollout.Status.SCORED, "completed"), (
            rollout.error,
            rollout.log_tail,
        )
        # The same template renders the prompt and reads the <tool_call> back: the agent wrote the file, then answered.
        assert rollout.tools_used == {"write": 1} and rollout.final_message == DONE and rollout.score == 1.0
        calls = ModelCall.objects.filter(session=rollout.proxy_session, endpoint=endpoint).order_by("created_at")
        assert rollout.model_calls == calls.count() == 2 and all(call.status_code == 200 for call in calls)
        assert calls[0].response["choices"][0]["finish_reason"] == "tool_calls"
    finally:
        call_command("serve_checkpoint", "--stop", endpoint.name, stdout=StringIO())
    server.refresh_from_db()
    assert server.status == "stopped" and not alive(server.pid)


def test_a_lora_checkpoint_is_merged_once_and_served(dataset, fruit_model):
    from safetensors.torch import load_file

    checkpoint = trained_checkpoint(
        dataset, fruit_model, **{"lora.enabled": True, "lora.r": 8, "lora.alpha": 16, "learning_rate": 1e-3}
    )
    assert (Path(checkpoint.path) / "adapter_config.json").exists()
    report = serve(checkpoint)
    server = ModelServer.objects.get(checkpoint=checkpoint)
    merged = Path(checkpoint.path).parent / f"merged-{Path(checkpoint.path).name}-{checkpoint.sha256[:16]}"
    assert server.model_path == str(merged) and server.command[server.command.index("--") + 5] == report["endpoint"]
    assert (Path(checkpoint.path).parent / "served" / report["endpoint"]).resolve() == merged.resolve()
    assert not (merged / "adapter_config.json").exists() and (merged / "tokenizer.json").exists()
    assert json.loads((merged / "merged_from.json").read_text())["base_model_path"] == fruit_model
    # The adapter is in the weights: its target projections moved from the base's, the rest did not.
    base, weights = load_file(Path(fruit_model) / "model.safetensors"), load_file(merged / "model.safetensors")
    moved = {name for name in base if not (base[name] == weights[name]).all()}
    assert moved and all(name.split(".")[-2].endswith("_proj") for name in moved)
    assert "model.embed_tokens.weight" not in moved
    try:
        # A full model behind the endpoint: still the fruit conversation's tool call (1 step of LoRA at 1e-3).
        answer = chat(ModelEndpoint.objects.get(name=report["endpoint"]), fruit_conversation("/w", "ok")[:2])
        [tool_call] = answer["choices"][0]["message"]["tool_calls"]
        assert tool_call["function"]["name"] == "write"
    finally:
        call_command("serve_checkpoint", "--stop", report["endpoint"], stdout=StringIO())
    merged_at = (merged / "model.safetensors").stat().st_mtime_ns
    again = serve(checkpoint)  # merged once per checkpoint: the folder is reused
    try:
        assert (
            again["endpoint"] == report["endpoint"] and (merged / "model.safetensors").stat().st_mtime_ns == merged_at
        )
        assert ModelServer.objects.filter(checkpoint=checkpoint).count() == 2
    finally:
        call_command("serve_checkpoint", "--stop", report["endpoint"], stdout=StringIO())


def test_idle_and_gone_servers_are_stopped_the_base_models_too(dataset, tiny_model_path):
    # No training needed to serve: a checkpoint row on a saved model folder (the tiny model's) is enough here.
    checkpoint = checkpoint_on(dataset, tiny_model_path)
    serve(checkpoint)
    ckpt_server = ModelServer.objects.get(checkpoint=checkpoint)
    base_server = serve_base_model(checkpoint.run, backend="transformers")
    assert (base_server.checkpoint, base_server.model_path, base_server.endpoint.name) == (
        None,
        tiny_model_path,
        f"base-{checkpoint.run_id}",
    )
    assert serve_base_model(checkpoint.run, backend="transformers") == base_server  # up: not started twice
    assert stop_idle_servers(idle_seconds=3600) == []

    # A server whose process died (killed by hand, crashed) is marked stopped on the next sweep.
    os.killpg(base_server.pid, signal.SIGKILL)
    assert stop_idle_servers(idle_seconds=3600) == [base_server.pk]
    base_server.refresh_from_db()
    assert base_server.status == "stopped" and base_server.error == "it stopped answering"
    socket_path = base_server.command[base_server.command.index("--upstream-socket") + 1]
    assert not Path(socket_path).parent.exists()  # its front never removed it: the sweep did
    assert not base_server.endpoint.enabled

    assert stop_idle_servers(idle_seconds=0) == [ckpt_server.pk]
    ckpt_server.refresh_from_db()
    assert ckpt_server.status == "stopped" and ckpt_server.error.startswith("idle since")
    assert not ckpt_server.endpoint.enabled and not alive(ckpt_server.pid)


def test_a_registered_base_model_is_served_by_name_before_any_run(training_dir, tiny_model_path):
    """`base_models serve NAME` (what the learning bench evaluates first): endpoint base-NAME, not started twice,
    stopped and disabled by `base_models stop NAME`; an unknown name is a clear error."""
    from django.core.management.base import CommandError

    call_command("base_models", "add", "tiny", "--path", tiny_model_path, stdout=StringIO())
    out = StringIO()
    call_command("base_models", "serve", "tiny", "--backend", "transformers", "--json", stdout=out)
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    server = ModelServer.objects.get(endpoint__name="base-tiny")
    try:
        assert report == {"endpoint": "base-tiny", "base_url": server.endpoint.base_url}
        assert (server.checkpoint, server.model_path, server.status) == (None, tiny_model_path, "ready")
        with urllib.request.urlopen(
            urllib.request.Request(
                f"{server.endpoint.base_url}/models", headers={"Authorization": f"Bearer {server.endpoint.api_key()}"}
            ),
            timeout=30,
        ) as answer:
            assert answer.status == 200
        again = StringIO()
        call_command("base_models", "serve", "tiny", "--json", stdout=again)
        assert json.loads(again.getvalue().strip().splitlines()[-1]) == report
        assert ModelServer.objects.filter(endpoint__name="base-tiny").count() == 1
    finally:
        call_command("base_models", "stop", "tiny", stdout=StringIO())
    server.refresh_from_db()
    assert server.status == "stopped" and not server.endpoint.enabled and not alive(server.pid)
    with pytest.raises(CommandError, match="no base model 'nope' is registered"):
        call_command("base_models", "serve", "nope")


def test_evaluate_checkpoints_serves_each_and_the_base_and_charts_them(
    admin_client,
    fruit_task,
    dataset,
    tiny_model_path,
):
    from django.urls import reverse

    from benchmarks.models import Benchmark, BenchmarkVersion, PinnedRevision
    from evaluation.models import EvalRun
    from training_jobs.models import CheckpointEvaluation, TrainingRun

    version = BenchmarkVersion.objects.create(benchmark=Benchmark.objects.create(name="fruit-bench"), number=1)
    PinnedRevision.objects.create(version=version, revision=fruit_task)
    run = start_training_run(
        kind="sft",
        dataset=dataset,
        base_model_path=tiny_model_path,
        preset="tiny-cpu",
        cpu=True,
        enqueue=False,
        user=None,
    )
    execute_training(run.pk)
    out = StringIO()
    try:
        call_command(
            "evaluate_checkpoints",
            str(run.pk),
            "--benchmark",
            "fruit-bench",
            "--harness",
            "builtin",
            "--json",
            stdout=out,
            stderr=StringIO(),
        )
        report = json.loads(out.getvalue().strip().splitlines()[-1])
        assert [row["endpoint"] for row in report["evaluations"]] == [
            f"base-{run.pk}",
            f"ckpt-{run.pk}-1",
            f"ckpt-{run.pk}-2",
        ]
        # The base model's server is a ModelServer row like the checkpoints': the idle sweep sees all three.
        servers = ModelServer.objects.filter(status="ready")
        assert sorted(s.endpoint.name for s in servers) == sorted(r["endpoint"] for r in report["evaluations"])
        assert servers.get(endpoint__name=f"base-{run.pk}").checkpoint is None
        run.refresh_from_db()
        assert run.base_eval_run_id == report["evaluations"][0]["eval_run"]
        evaluations = CheckpointEvaluation.objects.filter(checkpoint__run=run).order_by("checkpoint__step")
        assert [e.eval_run_id for e in evaluations] == [row["eval_run"] for row in report["evaluations"][1:]]
        assert all(e.eval_run.benchmark_version == version for e in evaluations)
        # As the finished evaluations would leave them: the run page charts score per checkpoint against the base.
        for eval_run, mean in zip(
            EvalRun.objects.filter(pk__in=[r["eval_run"] for r in report["evaluations"]]).order_by("pk"),
            [0.25, 0.5, 0.75],
        ):
            EvalRun.objects.filter(pk=eval_run.pk).update(overall_mean=mean)
        html = admin_client.get(reverse("training:run", args=[run.pk])).content.decode()
        chart = json.loads(html.split('id="chart-scores" type="application/json">')[1].split("</script>")[0])
        assert chart["labels"] == ["step 1", "step 2"]
        assert chart["datasets"][0]["data"] == [0.5, 0.75] and chart["datasets"][1] == {
            "label": "base model",
            "data": [0.25, 0.25],
        }
    finally:
        for name in [f"base-{run.pk}", f"ckpt-{run.pk}-1", f"ckpt-{run.pk}-2"]:
            if ModelEndpoint.objects.filter(name=name).exists():
                call_command("serve_checkpoint", "--stop", name, stdout=StringIO())
    assert not ModelServer.objects.filter(status="ready").exists()
    assert TrainingRun.objects.get(pk=run.pk).status == "succeeded"
