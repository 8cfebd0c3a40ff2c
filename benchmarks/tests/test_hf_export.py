"""A frozen benchmark version as a Hugging Face dataset: Parquet and a dataset card read back with `datasets`, row by
row; the card's features as `datasets` derives them; the command, the API download; importing it back (round trip)."""

import io
import json
import zipfile
from io import StringIO

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.management import CommandError, call_command

from benchmarks import hf_export
from benchmarks.models import Benchmark, BenchmarkVersion
from benchmarks.services import BenchmarkError, create_version
from lib import hf_dataset
from tasks.formats.safe_parse import load_yaml
from tasks.models import Task, TaskRevision
from tasks.package import PackageFile, TaskPackage
from tasks.services import package_from_revision, save_package
from tasks.testing import make_task

datasets = pytest.importorskip("datasets")

RUBRIC = [{"name": "report", "target_file": "report.md", "scores": {s: f"level {s}" for s in ("0", "0.5", "1")}}]


@pytest.fixture
def version(benchmark, admin_user):
    rich = save_package(
        TaskPackage(
            external_id="t-rich",
            instruction="Write report.md from data/notes.txt.",
            metadata={"category": "office", "license": "CC-BY-4.0"},
            files=[
                PackageFile("data/notes.txt", "naïve notes\n".encode()),
                PackageFile("data/blob.bin", bytes(range(256))),
                PackageFile("reward.sh", b"#!/bin/sh\npython3 reward/check.py\n", role="reward"),
                PackageFile("solve.sh", b"#!/bin/sh\necho done > report.md\n", role="solution"),
            ],
            rubric=RUBRIC,
            code_weight=0.6,
            entry_extra={"input_mount_dir": "/workspace"},
        )
    ).task
    plain = make_task("t-plain")
    return create_version(benchmark, [rich.current_revision_id, plain.current_revision_id], user=admin_user)


def load(folder):
    return datasets.load_dataset("parquet", data_files={"test": str(folder / "data" / "test-*.parquet")})["test"]


def test_rows_load_back_with_datasets_one_per_pinned_revision(version, tmp_path):
    result = hf_export.export_version_hf(version, tmp_path / "hf")
    assert result.rows == 2 and result.files == ["README.md", "data/test-00000-of-00001.parquet"]
    rows = list(load(tmp_path / "hf"))
    assert [row["task_id"] for row in rows] == ["t-plain", "t-rich"]
    for row in rows:
        revision = TaskRevision.objects.get(task__external_id=row["task_id"], number=row["revision"])
        package = package_from_revision(revision)
        assert row["content_hash"] == revision.content_hash
        assert row["instruction"] == package.instruction and row["checker_entry"] == package.checker_entry
        assert row["code_weight"] == package.code_weight
        assert json.loads(row["rubric"]) == package.rubric and json.loads(row["metadata"]) == package.metadata
        assert json.loads(row["entry_extra"]) == package.entry_extra
        assert [(f["role"], f["path"], f["content"]) for f in row["files"]] == [
            (f.role, f.path, f.data) for f in package.files
        ]
    assert rows[1]["category"] == "office" and rows[0]["category"] is None


def test_card_front_matter_matches_what_datasets_derives(version, tmp_path):
    hf_export.export_version_hf(version, tmp_path / "hf")
    front = hf_dataset.read_card(tmp_path / "hf", load_yaml)
    loaded = load(tmp_path / "hf")
    assert front["dataset_info"]["features"] == loaded.features._to_yaml_list()
    assert front["dataset_info"]["splits"][0]["name"] == "test"
    assert front["dataset_info"]["splits"][0]["num_examples"] == 2
    assert front["configs"] == [
        {"config_name": "default", "data_files": [{"split": "test", "path": "data/test-*"}], "default": True}
    ]
    # One task records CC-BY-4.0 and the other nothing: no licence can be claimed for the whole.
    assert front["license"] == "other"
    provenance = front["clawgym"]
    assert provenance["benchmark"] == "claw-bench" and provenance["version"] == 1
    hashes = dict(version.pins.values_list("revision__task__external_id", "revision__content_hash"))
    assert provenance["revisions"] == [f"{task}@{hashes[task]}" for task in sorted(hashes)]
    assert provenance["clawgym_version"]
    text = (tmp_path / "hf" / "README.md").read_text()
    assert "## Provenance" in text and "record no licence" in text


def test_a_licence_all_tasks_record_is_the_cards(benchmark, admin_user, tmp_path):
    task = save_package(TaskPackage(external_id="t-mit", instruction="Do it.", metadata={"license": "mit"})).task
    version = create_version(benchmark, [task.current_revision_id], user=admin_user)
    hf_export.export_version_hf(version, tmp_path / "hf")
    assert hf_dataset.read_card(tmp_path / "hf", load_yaml)["license"] == "mit"


def test_import_back_recreates_the_same_revisions_and_a_version(version, admin_user, tmp_path):
    hf_export.export_version_hf(version, tmp_path / "hf")
    before = {
        r.task.external_id: (r.content_hash, package_from_revision(r))
        for r in TaskRevision.objects.filter(benchmark_versions=version).select_related("task")
    }
    # A catalog without them: the version, the benchmark and the tasks gone.
    BenchmarkVersion.objects.all().delete()
    Benchmark.objects.all().delete()
    Task.objects.all().delete()
    result = hf_export.import_version_hf(tmp_path / "hf", user=admin_user)
    assert result.as_dict() == {
        "benchmark": "claw-bench",
        "version": 1,
        "tasks": 2,
        "imported": 2,
        "updated": 0,
        "unchanged": 0,
    }
    after = {r.task.external_id: r for r in result.version.revisions.select_related("task")}
    assert {task: r.content_hash for task, r in after.items()} == {task: h for task, (h, _) in before.items()}
    for task, (_, package) in before.items():
        assert package_from_revision(after[task]) == package
    # Importing again changes nothing but freezes the same revisions as v2.
    again = hf_export.import_version_hf(tmp_path / "hf", user=admin_user)
    assert (again.version.number, again.unchanged) == (2, 2)
    assert set(again.version.revisions.values_list("pk", flat=True)) == {r.pk for r in after.values()}


def test_import_refuses_a_changed_export_and_imports_nothing(version, admin_user, tmp_path):
    hf_export.export_version_hf(version, tmp_path / "hf")
    card = (tmp_path / "hf" / "README.md").read_text()
    (tmp_path / "hf" / "README.md").write_text(card.replace("benchmark: claw-bench", "benchmark: other-bench"))
    path = tmp_path / "hf" / "data" / "test-00000-of-00001.parquet"
    table = pq.read_table(path).to_pylist()
    table[0]["instruction"] += " Changed."
    pq.write_table(pa.Table.from_pylist(table, schema=hf_export.SCHEMA), path)
    with pytest.raises(BenchmarkError, match="does not hash to the recorded"):
        hf_export.import_version_hf(tmp_path / "hf", user=admin_user)
    assert not Benchmark.objects.filter(name="other-bench").exists()
    assert TaskRevision.objects.filter(task__external_id="t-plain").count() == 1


def test_import_refuses_what_is_not_an_export(admin_user, tmp_path, db):
    with pytest.raises(BenchmarkError, match="no README.md"):
        hf_export.import_version_hf(tmp_path, user=admin_user)
    (tmp_path / "README.md").write_text("---\nlicense: mit\n---\n# A dataset\n")
    with pytest.raises(BenchmarkError, match="not a ClawGym benchmark export"):
        hf_export.import_version_hf(tmp_path, user=admin_user)


def run(command, *args) -> str:
    out = StringIO()
    call_command(command, *args, stdout=out)
    return out.getvalue().strip().splitlines()[-1]


def test_commands_export_and_import(version, admin_user, tmp_path):
    report = json.loads(
        run("export_benchmark", "--benchmark", "claw-bench", "--out", str(tmp_path / "hf"), "--format", "hf", "--json")
    )
    assert (report["format"], report["tasks"], report["files"]) == ("hf", 2, 2)
    assert report["splits"] == {"default/test": 2}
    with pytest.raises(CommandError, match="not empty; use --force"):
        run("export_benchmark", "--benchmark", "claw-bench", "--out", str(tmp_path / "hf"), "--format", "hf")
    by = ("--by", admin_user.username)
    imported = json.loads(run("import_benchmark", str(tmp_path / "hf"), "--benchmark", "copy", *by, "--json"))
    assert imported == {"benchmark": "copy", "version": 1, "tasks": 2, "imported": 0, "updated": 0, "unchanged": 2}
    with pytest.raises(CommandError, match="no README.md") as refused:
        run("import_benchmark", str(tmp_path / "nothing"), *by)
    assert refused.value.returncode == 2


def test_api_download_is_the_export_zipped(api_as, viewer, version, tmp_path):
    response = api_as(viewer).get(f"/api/benchmark-versions/{version.pk}/export/", {"format": "hf"})
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"] == 'attachment; filename="claw-bench-v1-hf.zip"'
    with zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content))) as archive:
        archive.extractall(tmp_path)
    folder = tmp_path / "claw-bench-v1-hf"
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == [
        "README.md",
        "data/test-00000-of-00001.parquet",
    ]
    assert [row["task_id"] for row in load(folder)] == ["t-plain", "t-rich"]
    assert load_yaml((folder / "README.md").read_text().split("---")[1])["clawgym"]["version"] == 1


def test_a_card_holding_a_yaml_bomb_is_refused_before_anything_is_imported(admin_user, tmp_path):
    # An export read back may come from anyone: its card is read with the bounded loader (tasks.formats.safe_parse).
    folder = tmp_path / "bomb"
    folder.mkdir()
    laughs = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    laughs += [
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)}]" for i in range(9)
    ]
    (folder / "README.md").write_text("---\n" + "\n".join(laughs) + "\n---\n\n# bomb\n")
    with pytest.raises(BenchmarkError, match="front matter is not valid YAML"):
        hf_export.import_version_hf(folder, user=admin_user)
    assert not Task.objects.exists() and not BenchmarkVersion.objects.exists()
