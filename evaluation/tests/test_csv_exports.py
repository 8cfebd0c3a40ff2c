"""The evaluation run's CSV, through every way it is written (the page's download, the API, `eval_report --csv`):
a cell whose text a spreadsheet would run as a formula (an error quoting a model server, a model name, a task id) is
written with a leading quote, and the figures stay numbers."""

import csv
import io
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from evaluation.harnesses.base import ExitReason
from evaluation.models import Rollout
from evaluation.services import run_progress, runs
from evaluation.testing import make_tasks
from llm.models import ModelEndpoint

pytestmark = pytest.mark.django_db

FORMULAS = ['=HYPERLINK("http://evil.example/","click")', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A9)", "\t=1+1"]


@pytest.fixture
def run(db):
    endpoint = ModelEndpoint.objects.create(
        name="m", base_url="http://127.0.0.1:9/v1", model="\r=model()", roles=["agent"]
    )
    run, _ = runs.create_eval_run(
        endpoint=endpoint, revisions=list(make_tasks().values()), harness="builtin", repeats=2, user=None
    )
    for index, rollout in enumerate(run.rollouts.order_by("pk")):
        Rollout.objects.filter(pk=rollout.pk).update(
            status=Rollout.Status.SCORED,
            exit_reason=ExitReason.ERROR,
            score=0.25,
            cost="0.01",
            attempt=1,
            error=FORMULAS[index % len(FORMULAS)] + "\nsecond line",
        )
    run_progress.recompute_run(run)
    return run


def rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_every_csv_export_writes_formula_text_as_text(run, viewer_client, api_as, viewer):
    page = viewer_client.get(reverse("evaluations:export-csv", args=[run.pk]))
    api = api_as(viewer).get(f"/api/eval-runs/{run.pk}/export/?format=csv")
    out = StringIO()
    call_command("eval_report", str(run.pk), "--csv", stdout=out)
    exports = {
        "page": b"".join(page.streaming_content).decode(),
        "api": b"".join(api.streaming_content).decode(),
        "command": out.getvalue(),
    }
    errors = {r.pk: r.error.splitlines()[0] for r in run.rollouts.all()}
    for where, text in exports.items():
        found = rows(text)
        assert len(found) == len(errors) == 8, where
        for row in found:
            assert row["error"] == "'" + errors[int(row["rollout"])], (where, row)
            assert row["model"] == "'\r=model()", where
            assert (row["score"], row["cost"], row["turns"]) == ("0.25", "0.01", ""), where
        assert {row["error"][1] for row in found} == {"=", "+", "-", "@", "\t"}, where
