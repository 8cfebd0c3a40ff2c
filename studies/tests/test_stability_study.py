"""A stability study end to end: the builtin harness in bubblewrap, evaluation.testing's scripted strong model through
the live proxy, `manage.py study start … --json` (in this process, --here) and `study show`.

By hand: a stratified subset of 3 of evaluation.testing's 4 tasks keeps one of eval-a / eval-b (both solved: 1.0),
eval-c (solved: 1.0) and eval-d (not: 0.75); every run scores the same, mean 2.75 / 3, so the run means' std is 0 and
every paired difference with the best run is 0 (p = 1)."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from evaluation.models import EvalRun
from evaluation.testing import needs_bwrap
from jobs.models import JobRun
from studies.models import Study

pytestmark = [needs_bwrap, pytest.mark.django_db(transaction=True)]


def run_command(*args) -> tuple[str, str, CommandError | None]:
    out, err = StringIO(), StringIO()
    try:
        call_command(*args, stdout=out, stderr=err)
    except CommandError as exc:
        return out.getvalue(), err.getvalue(), exc
    return out.getvalue(), err.getvalue(), None


def last_json(text: str) -> dict:
    return json.loads(text.strip().splitlines()[-1])


def test_a_stability_study_runs_three_runs_and_reports_their_spread(world):
    out, err, error = run_command(
        "study", "start", "--kind", "stability", "--benchmark", "eval-bench", "--endpoint", "strong",
        "--runs", "3", "--subset", "3", "--harness", "builtin", "--here", "--json",
    )  # fmt: skip
    assert error is None, f"{error}\n{err}"
    report = last_json(out)
    assert report["status"] == "complete" and report["kind"] == "stability" and report["missing"] == []
    study = Study.objects.get(pk=report["study"])
    runs = [EvalRun.objects.get(pk=row["eval_run"]) for row in report["cells"]]
    assert len({r.pk for r in runs}) == 3 and all(r.status == "complete" for r in runs)
    assert all(r.inline and r.on_finish == "" for r in runs)  # run and followed by this process
    assert not JobRun.objects.filter(kind="studies.advance").exists()  # nothing queued that no worker would take
    tasks = sorted(r.revision.task.external_id for r in runs[0].task_results.select_related("revision__task"))
    assert len(tasks) == 3 and tasks[1:] == ["eval-c", "eval-d"] and tasks[0] in {"eval-a", "eval-b"}
    mean = round(2.75 / 3, 6)
    for row, run in zip(report["cells"], runs, strict=True):
        assert row["status"] == "complete" and row["error"] == ""
        assert row["mean"] == pytest.approx(mean, abs=1e-6) and row["ci"] == run.summary["overall"]["ci"]
    assert report["best"]["label"] == "run 1" and report["best"]["eval_run"] == runs[0].pk
    assert [(c["label"], c["mean_difference"], c["p_value"]) for c in report["comparisons"]] == [
        ("run 2", 0.0, 1.0),
        ("run 3", 0.0, 1.0),
    ]
    assert report["stability"]["std"] == 0.0 and report["stability"]["mean"] == pytest.approx(mean, abs=1e-6)

    shown, _err, error = run_command("study", "show", str(study.pk), "--json")
    assert error is None and last_json(shown) == report
    text, _err, _error = run_command("study", "show", str(study.pk))
    assert "run 1" in text and "complete" in text and "best: run 1 (0.917)" in text


def test_unknown_names_and_a_training_study_here_are_refused(world):
    for args, message in [
        (("--kind", "stability", "--benchmark", "nope", "--endpoint", "strong"), "no benchmark named 'nope'"),
        (("--kind", "stability", "--benchmark", "eval-bench", "--endpoint", "zz"), "no model endpoint named 'zz'"),
        (("--kind", "stability", "--endpoint", "strong"), "--benchmark is needed"),
        (("--kind", "stability", "--benchmark", "eval-bench", "--endpoint", "strong", "--runs", "1"), "runs must be"),
        (("--kind", "reward_threshold", "--benchmark", "eval-bench", "--values", "0.5", "--here"), "cannot run --here"),
    ]:
        _out, _err, error = run_command("study", "start", *args)
        assert error is not None and message in str(error) and error.returncode == 2, (args, error)
    _out, _err, error = run_command("study", "show", "999")
    assert error is not None and "no study #999" in str(error)
    assert not Study.objects.exists()
