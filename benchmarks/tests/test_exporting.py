"""Exporting a frozen benchmark version: folder, .tar.gz and .zip; manifest; determinism; round trip; the command."""

import io
import json
import tarfile
import zipfile
from io import StringIO
from unittest import mock

import pytest
from django.core.management import CommandError, call_command

from benchmarks import exporting
from benchmarks.exporting import BenchmarkExportError, archive_chunks, export_version, find_version
from benchmarks.models import Benchmark
from benchmarks.services import create_version
from tasks.importing import import_path
from tasks.models import BenchmarkCategory, Task, TaskRevision
from tasks.package import PackageFile, TaskPackage
from tasks.services import revise_task, save_package
from tasks.testing import make_task

RUBRIC = [
    {
        "name": "report",
        "target_file": "report.md",
        "scores": {s: f"level {s}" for s in ("0", "0.25", "0.5", "0.75", "1")},
        "weight": 2.0,
    }
]


@pytest.fixture
def version(benchmark, admin_user):
    """v1 of claw-bench pinning two tasks: one plain, one with a rubric, λ, a script, a category and extras."""
    BenchmarkCategory.objects.create(slug="office", name="Office tasks")
    rich = save_package(
        TaskPackage(
            external_id="t-rich",
            instruction="Write report.md from data/notes.txt.\n\nKeep it short.",
            metadata={"category": "Office tasks", "grading_type": "hybrid"},
            files=[
                PackageFile("data/notes.txt", "naïve notes\n".encode()),
                PackageFile("reward.sh", b"#!/bin/sh\npython3 reward/check.py\n", role="reward"),
                PackageFile("check.py", b"print('{}')\n", role="reward"),
                PackageFile("solve.sh", b"#!/bin/sh\necho done > report.md\n", role="solution"),
            ],
            rubric=RUBRIC,
            code_weight=0.6,
            entry_extra={"input_mount_dir": "/workspace"},
        )
    ).task
    plain = make_task("t-plain")
    benchmark.description = "Claw tasks, reviewed."
    benchmark.save()
    pinned = [plain.current_revision_id, rich.current_revision_id]
    return create_version(benchmark, pinned, user=admin_user, note="first cut")


def archive_bytes(version, fmt) -> bytes:
    return b"".join(archive_chunks(version, fmt))


def members(data: bytes, fmt: str) -> dict[str, bytes]:
    if fmt == "zip":
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            return {i.filename: zf.read(i) for i in zf.infolist()}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}


def test_folder_export_has_the_manifest_and_task_folders(version, tmp_path):
    out = tmp_path / "bench"
    result = export_version(version, out)
    assert result.format == "dir" and result.tasks == 2 and result.path == out
    assert sorted(p.name for p in out.iterdir()) == ["benchmark.json", "t-plain", "t-rich"]
    rich = out / "t-rich"
    entry = json.loads((rich / "data_entry.json").read_text())
    assert entry["task_id"] == "t-rich" and entry["rubric"] == RUBRIC and entry["lambda"] == 0.6
    assert entry["input_mount_dir"] == "/workspace"
    assert (rich / "input_files/data/notes.txt").read_text() == "naïve notes\n"
    assert (rich / "solution/solve.sh").stat().st_mode & 0o111  # scripts stay executable
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "benchmark.json",
        "t-plain/data_entry.json",
        "t-plain/input_files/sales.csv",
        "t-plain/reward/check.py",
        "t-plain/reward/reward.sh",
        "t-rich/data_entry.json",
        "t-rich/input_files/data/notes.txt",
        "t-rich/reward/check.py",
        "t-rich/reward/reward.sh",
        "t-rich/solution/solve.sh",
    ]
    assert result.files == 10 and result.bytes == sum(p.stat().st_size for p in out.rglob("*") if p.is_file())


def test_manifest_names_the_version_and_each_pinned_revision(version, tmp_path):
    export_version(version, tmp_path / "bench")
    manifest = json.loads((tmp_path / "bench/benchmark.json").read_text())
    plain, rich = (TaskRevision.objects.get(task__external_id=t) for t in ("t-plain", "t-rich"))
    assert manifest == {
        "format": "clawgym-benchmark/1",
        "benchmark": "claw-bench",
        "description": "Claw tasks, reviewed.",
        "version": 1,
        "frozen_at": version.frozen_at.isoformat(),
        "frozen_by": "ada_admin",
        "note": "first cut",
        "task_count": 2,
        "tasks": [
            {"task_id": "t-plain", "revision": 1, "content_hash": plain.content_hash, "category": None},
            {"task_id": "t-rich", "revision": 1, "content_hash": rich.content_hash, "category": "office"},
        ],
    }


@pytest.mark.parametrize("fmt", ["tar.gz", "zip"])
def test_archive_holds_the_same_files_as_the_folder_under_one_top_folder(version, tmp_path, fmt):
    export_version(version, tmp_path / "bench")
    result = export_version(version, tmp_path / f"bench.{fmt}")
    assert result.format == fmt and result.tasks == 2 and result.files == 10
    assert result.bytes == (tmp_path / f"bench.{fmt}").stat().st_size
    got = members((tmp_path / f"bench.{fmt}").read_bytes(), fmt)
    folder = tmp_path / "bench"
    expected = {
        f"claw-bench-v1/{p.relative_to(folder).as_posix()}": p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }
    assert got == expected


def test_tar_members_are_plain_files_with_fixed_times_and_no_owner(version):
    with tarfile.open(fileobj=io.BytesIO(archive_bytes(version, "tar.gz")), mode="r:gz") as tar:
        infos = tar.getmembers()
    assert [m.name for m in infos][0] == "claw-bench-v1/benchmark.json"
    assert all(m.isfile() and m.mtime == int(version.frozen_at.timestamp()) for m in infos)
    assert {(m.uid, m.gid, m.uname, m.gname) for m in infos} == {(0, 0, "", "")}
    modes = {m.name.split("/", 1)[1]: m.mode for m in infos}
    assert modes["t-rich/reward/reward.sh"] == 0o755 and modes["t-plain/reward/reward.sh"] == 0o644


@pytest.mark.parametrize("fmt", ["tar.gz", "zip"])
def test_exporting_twice_gives_identical_bytes(version, tmp_path, fmt):
    first = export_version(version, tmp_path / f"a.{fmt}").path.read_bytes()
    second = export_version(version, tmp_path / f"b.{fmt}").path.read_bytes()
    assert first == second == archive_bytes(version, fmt)


def test_export_is_made_from_the_pinned_revisions_not_the_current_ones(version, tmp_path, admin_user):
    task = Task.objects.get(external_id="t-plain")
    pinned_hash = task.current_revision.content_hash
    before = archive_bytes(version, "zip")
    revise_task(
        task,
        user=admin_user,
        message="later edit",
        instruction="Something else entirely.",
        file_changes={("input", "sales.csv"): b"item,amount\nz,9\n"},
    )
    assert archive_bytes(version, "zip") == before
    out = export_version(version, tmp_path / "bench").path
    entry = json.loads((out / "t-plain/data_entry.json").read_text())
    assert entry["user_query"] == "Summarise sales.csv into report.md."
    assert (out / "t-plain/input_files/sales.csv").read_bytes() == b"item,amount\na,1\n"
    assert json.loads((out / "benchmark.json").read_text())["tasks"][0] == {
        "task_id": "t-plain",
        "revision": 1,
        "content_hash": pinned_hash,
        "category": None,
    }


@pytest.mark.parametrize("fmt", ["dir", "tar.gz", "zip"])
def test_round_trip_into_an_empty_catalog_gives_the_same_content_hashes(version, tmp_path, admin_user, fmt):
    # The catalog's later edit must not leak into the export: the import gives the pinned content.
    revise_task(Task.objects.get(external_id="t-rich"), user=admin_user, message="edit", instruction="Changed.")
    name = "bench" if fmt == "dir" else f"bench.{fmt}"
    out = export_version(version, tmp_path / name).path
    pinned = dict(version.revisions.values_list("task__external_id", "content_hash"))
    Benchmark.objects.all().delete()  # its versions pin (and protect) the revisions
    Task.objects.all().delete()
    report = import_path(out)
    assert report.as_dict() == {"imported": 2, "updated": 0, "unchanged": 0, "failed": [], "failed_count": 0}
    imported = {t.external_id: t.current_revision.content_hash for t in Task.objects.select_related("current_revision")}
    assert imported == pinned
    assert Task.objects.get(external_id="t-rich").benchmark_category.slug == "office"


@pytest.mark.parametrize("fmt, name", [("dir", "bench"), ("tar.gz", "bench.tar.gz"), ("zip", "bench.zip")])
def test_a_failed_export_leaves_nothing_behind(version, tmp_path, fmt, name):
    real = exporting.package_from_revision
    calls = []

    def fail_on_second(revision):
        calls.append(revision)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(revision)

    with mock.patch.object(exporting, "package_from_revision", fail_on_second), pytest.raises(OSError):
        export_version(version, tmp_path / name)
    assert len(calls) == 2 and list(tmp_path.iterdir()) == []


def test_a_failed_forced_export_keeps_the_old_file(version, tmp_path):
    out = tmp_path / "bench.zip"
    out.write_bytes(b"the previous export")
    with (
        mock.patch.object(exporting, "package_from_revision", side_effect=OSError("disk gone")),
        pytest.raises(OSError),
    ):
        export_version(version, out, force=True)
    assert out.read_bytes() == b"the previous export" and list(tmp_path.iterdir()) == [out]


def test_existing_targets_need_force(version, tmp_path):
    folder = tmp_path / "bench"
    folder.mkdir()
    export_version(version, folder)  # an empty folder is fine
    with pytest.raises(BenchmarkExportError, match="already exists and is not empty; use --force"):
        export_version(version, folder)
    (folder / "stale.txt").write_text("old")
    export_version(version, folder, force=True)
    assert not (folder / "stale.txt").exists() and (folder / "benchmark.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench"]  # the replaced folder is gone too
    archive = tmp_path / "bench.tar.gz"
    archive.write_bytes(b"x")
    with pytest.raises(BenchmarkExportError, match="already exists"):
        export_version(version, archive)
    export_version(version, archive, force=True)
    assert tarfile.is_tarfile(archive)
    with pytest.raises(BenchmarkExportError, match="is a folder; name the archive file"):
        export_version(version, folder, fmt="zip", force=True)


def test_format_comes_from_the_suffix_unless_named(version, tmp_path):
    assert export_version(version, tmp_path / "a.tgz").format == "tar.gz"
    assert export_version(version, tmp_path / "b.ZIP").format == "zip"
    assert export_version(version, tmp_path / "c.bin", fmt="zip").format == "zip"
    assert zipfile.is_zipfile(tmp_path / "c.bin")
    with pytest.raises(BenchmarkExportError, match="unknown export format 'rar'"):
        export_version(version, tmp_path / "d", fmt="rar")


def test_find_version(version, admin_user):
    assert find_version("claw-bench") == version
    v2 = create_version(version.benchmark, version.revisions.values_list("pk", flat=True), user=admin_user)
    assert find_version("claw-bench") == v2 and find_version("claw-bench", 1) == version
    with pytest.raises(BenchmarkExportError, match=r"claw-bench has no version 7 \(it has v1, v2\)"):
        find_version("claw-bench", 7)
    with pytest.raises(BenchmarkExportError, match=r"no benchmark named 'nope' \(benchmarks: claw-bench\)"):
        find_version("nope")
    Benchmark.objects.create(name="empty-bench")
    with pytest.raises(BenchmarkExportError, match="empty-bench has no frozen version yet"):
        find_version("empty-bench")


# --- the export_benchmark command --------------------------------------------------------------------------------


def run(*args) -> str:
    out = StringIO()
    call_command("export_benchmark", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_command_exports_the_latest_version_and_prints_json(version, tmp_path, admin_user):
    rich = Task.objects.get(external_id="t-rich")
    create_version(version.benchmark, [rich.current_revision_id], user=admin_user, note="without t-plain")
    out = tmp_path / "latest.zip"
    last = run("--benchmark", "claw-bench", "--out", str(out), "--json").strip().splitlines()[-1]
    assert json.loads(last) == {
        "benchmark": "claw-bench",
        "version": 2,
        "format": "zip",
        "path": str(out),
        "tasks": 1,
        "files": 6,
        "bytes": out.stat().st_size,
    }
    assert {n.split("/")[1] for n in members(out.read_bytes(), "zip")} == {"benchmark.json", "t-rich"}
    text = run("--benchmark", "claw-bench", "--version", "1", "--out", str(tmp_path / "v1"), "--format", "tar.gz")
    assert "exported claw-bench v1 (2 tasks, 10 files" in text and tarfile.is_tarfile(tmp_path / "v1")


def test_command_errors(version, tmp_path, benchmark):
    with pytest.raises(CommandError, match="no benchmark named 'nope'"):
        run("--benchmark", "nope", "--out", str(tmp_path / "x"))
    with pytest.raises(CommandError, match="claw-bench has no version 3"):
        run("--benchmark", "claw-bench", "--version", "3", "--out", str(tmp_path / "x"))
    Benchmark.objects.create(name="unfrozen")
    with pytest.raises(CommandError, match="unfrozen has no frozen version yet: freeze one first"):
        run("--benchmark", "unfrozen", "--out", str(tmp_path / "x"))
    (tmp_path / "full").mkdir()
    (tmp_path / "full/keep.txt").write_text("mine")
    with pytest.raises(CommandError, match="already exists and is not empty; use --force"):
        run("--benchmark", "claw-bench", "--out", str(tmp_path / "full"))
    assert (tmp_path / "full/keep.txt").read_text() == "mine"
    with pytest.raises(CommandError, match="invalid choice: 'rar'"):
        run("--benchmark", "claw-bench", "--out", str(tmp_path / "y"), "--format", "rar")
    assert (
        json.loads(run("--benchmark", "claw-bench", "--out", str(tmp_path / "full"), "--force", "--json"))["tasks"] == 2
    )


# --- the API -------------------------------------------------------------------------------------------------------


def export_url(version) -> str:
    return f"/api/benchmark-versions/{version.pk}/export/"


@pytest.mark.parametrize("who, code", [("outsider", 403), ("viewer", 200), ("reviewer", 200), ("admin_user", 200)])
def test_api_export_needs_a_role(request, api_as, version, who, code):
    assert api_as(request.getfixturevalue(who)).get(export_url(version), {"format": "zip"}).status_code == code


def test_api_export_refuses_anonymous_users(client, version):
    assert client.get(export_url(version)).status_code in (401, 403)


@pytest.mark.parametrize("fmt, content_type", [("tar.gz", "application/gzip"), ("zip", "application/zip")])
def test_api_export_gives_the_exporters_bytes(api_as, viewer, version, tmp_path, fmt, content_type):
    response = api_as(viewer).get(export_url(version), {"format": fmt})
    assert response.status_code == 200 and response["Content-Type"] == content_type
    assert response["Content-Disposition"] == f'attachment; filename="claw-bench-v1.{fmt}"'
    assert b"".join(response.streaming_content) == export_version(version, tmp_path / f"v1.{fmt}").path.read_bytes()


def test_api_export_defaults_to_tar_gz_and_refuses_other_formats(api_as, viewer, version):
    client = api_as(viewer)
    assert client.get(export_url(version))["Content-Type"] == "application/gzip"
    response = client.get(export_url(version), {"format": "json"})
    assert response.status_code == 400 and response.json() == {"format": "'json' is not one of tar.gz, zip, hf"}
    assert client.get(f"/api/benchmark-versions/{version.pk + 100}/export/").status_code == 404


def test_api_versions_show_task_count_and_download_urls(api_as, viewer, version):
    base = f"http://testserver{export_url(version)}"
    body = api_as(viewer).get(f"/api/benchmark-versions/{version.pk}/").json()
    assert body["task_count"] == 2 and body["note"] == "first cut"
    assert body["downloads"] == {"tar.gz": f"{base}?format=tar.gz", "zip": f"{base}?format=zip"}
    (row,) = api_as(viewer).get("/api/benchmark-versions/", {"benchmark": "claw-bench"}).json()["results"]
    assert row["task_count"] == 2 and row["downloads"] == body["downloads"]
