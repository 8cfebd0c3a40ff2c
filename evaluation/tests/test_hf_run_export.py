"""An evaluation run's per-rollout results as a Hugging Face dataset, through `eval_report --hf` and the API's
`?format=hf`: read back with `datasets.load_dataset("parquet", ...)` and compared row by row with the CSV export's
rows; the card's features and provenance."""

import io
import json
import zipfile
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from evaluation import exports, hf_export
from evaluation.harnesses.base import ExitReason
from evaluation.models import Rollout
from evaluation.services import run_progress, runs
from evaluation.testing import make_tasks
from lib import hf_dataset
from llm.models import ModelEndpoint
from tasks.formats.safe_parse import load_yaml

datasets = pytest.importorskip("datasets")
pytestmark = pytest.mark.django_db


@pytest.fixture
def run(db):
    endpoint = ModelEndpoint.objects.create(name="m", base_url="http://127.0.0.1:9/v1", model="org/m", roles=["agent"])
    run, _ = runs.create_eval_run(
        endpoint=endpoint, revisions=list(make_tasks().values()), harness="builtin", repeats=2, user=None
    )
    for index, rollout in enumerate(run.rollouts.order_by("pk")):
        scored = index % 3 != 2
        Rollout.objects.filter(pk=rollout.pk).update(
            status=Rollout.Status.SCORED if scored else Rollout.Status.FAILED,
            exit_reason=ExitReason.COMPLETED if scored else ExitReason.ERROR,
            score=index / 10 if scored else None,
            cost="0.0125",
            attempt=1,
            turns=index,
            input_tokens=1000 + index,
            error="" if scored else "the model server went away\nsecond line",
        )
    run_progress.recompute_run(run)
    return run


def load(folder):
    return datasets.load_dataset("parquet", data_files={"rollouts": str(folder / "data" / "rollouts-*.parquet")})[
        "rollouts"
    ]


def test_rows_load_back_as_the_csv_exports_rows(run, tmp_path):
    out = StringIO()
    call_command("eval_report", str(run.pk), "--hf", str(tmp_path / "hf"), stdout=out)
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    assert report["rows"] == run.rollouts.count() == 2 * len(make_tasks()) and report["format"] == "hf"
    loaded = list(load(tmp_path / "hf"))
    expected = list(exports.iter_rows(run))
    hashes = dict(run.rollouts.values_list("pk", "revision__content_hash"))
    assert len(loaded) == len(expected)
    for row, want in zip(loaded, expected, strict=True):
        assert row == {**want, "content_hash": hashes[want["rollout"]]}
    assert any(row["score"] is None for row in loaded) and any(row["score"] for row in loaded)
    with pytest.raises(CommandError, match="not empty; use --force"):
        call_command("eval_report", str(run.pk), "--hf", str(tmp_path / "hf"), stdout=StringIO())


def test_card_has_typed_features_and_the_runs_provenance(run, tmp_path):
    hf_export.export_run_hf(run, tmp_path / "hf")
    front = hf_dataset.read_card(tmp_path / "hf", load_yaml)
    features = front["dataset_info"]["features"]
    assert features == load(tmp_path / "hf").features._to_yaml_list()
    assert {"name": "score", "dtype": "float64"} in features and {"name": "turns", "dtype": "int32"} in features
    assert front["dataset_info"]["splits"] == [
        {"name": "rollouts", "num_bytes": front["dataset_info"]["dataset_size"], "num_examples": run.rollouts.count()}
    ]
    provenance = front["clawgym"]
    assert provenance["run"] == run.pk and provenance["models"] == ["org/m"] and provenance["harness"] == "builtin"
    assert provenance["revisions"] == sorted(
        {f"{t}@{h}" for t, h in run.rollouts.values_list("revision__task__external_id", "revision__content_hash")}
    )
    assert front["license"] == "other"


def test_api_download_is_the_export_zipped(run, api_as, viewer, tmp_path):
    response = api_as(viewer).get(f"/api/eval-runs/{run.pk}/export/", {"format": "hf"})
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"] == f'attachment; filename="eval-run-{run.pk}-hf.zip"'
    with zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content))) as archive:
        archive.extractall(tmp_path)
    loaded = load(tmp_path / f"eval-run-{run.pk}-hf")
    assert [row["rollout"] for row in loaded] == [row["rollout"] for row in exports.iter_rows(run)]
