"""What a trainer inherits of its worker's environment: an allow-list (training_jobs.child_env), never SECRET_KEY,
DATABASE_URL or a model provider's key, read from the real trainer's /proc/PID/environ (accelerate's launcher and the
trainer it starts) while an SFT run trains. The model server's front and its backend are checked the same way in
test_serving_job."""

import os
import time
from pathlib import Path

import pytest
from django.conf import settings

from jobs.testing import database_url
from training_jobs.services.runs import start_training_run
from training_jobs.testing.runs import in_thread, trainer_pid

# once: a trainer run, nothing about the database engine.
# A timeout above the 600 s the test gives its trainer subprocess to end (below), so that its error is the one.
pytestmark = [
    pytest.mark.once,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("training_dir"),
    pytest.mark.timeout(900),
]

SECRETS = ("SECRET_KEY", "DATABASE_URL", "CLAWGYM_KEY_PROBE", "DJANGO_SETTINGS_MODULE")


def environ(pid: int) -> dict:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def descendants(pid: int) -> list[int]:
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == parent:
                    found.append(int(stat.parent.name))
                    frontier.append(int(stat.parent.name))
            except (OSError, IndexError, ValueError):
                continue
    return found


def test_the_trainer_inherits_none_of_the_workers_secrets(dataset, tiny_model_path, training_dir, monkeypatch):
    # The worker's environment as deployed: its secrets beside what the libraries read.
    monkeypatch.setenv("SECRET_KEY", settings.SECRET_KEY)
    monkeypatch.setenv("DATABASE_URL", database_url())
    monkeypatch.setenv("CLAWGYM_KEY_PROBE", "probe-secret")
    monkeypatch.setenv("HF_HOME", str(Path(settings.CLAWGYM_TRAINING_DIR) / "hf-home"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    run = start_training_run(
        kind="sft",
        dataset=dataset,
        base_model_path=tiny_model_path,
        preset="tiny-cpu",
        cpu=True,
        overrides={"max_steps": 1},
        enqueue=False,
        user=None,
    )
    thread = in_thread(run.pk)
    launcher = trainer_pid(run)
    seen = {launcher: environ(launcher)}
    deadline = time.monotonic() + 120
    while len(seen) < 2 and time.monotonic() < deadline and thread.is_alive():  # accelerate starts the trainer
        for pid in descendants(launcher):
            try:
                seen.setdefault(pid, environ(pid))
            except OSError:
                pass  # gone already
        time.sleep(0.1)
    thread.join(timeout=600)
    run.refresh_from_db()
    assert run.status == "succeeded", run.log_tail
    assert len(seen) >= 2, "never saw the trainer accelerate started"
    for pid, env in seen.items():
        assert not set(SECRETS) & set(env) and "probe-secret" not in env.values(), (pid, set(SECRETS) & set(env))
        # What it needs passes: the system's own, the libraries' settings, and what it is given on purpose.
        assert env["PATH"] == os.environ["PATH"] and env["HF_HOME"] == os.environ["HF_HOME"]
        assert env["OMP_NUM_THREADS"] == "1" and env["HF_HUB_OFFLINE"] == "1"
    assert seen[launcher]["CLAWGYM_WATCH_PID"] == str(os.getpid())
