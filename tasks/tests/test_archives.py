"""Archives of tasks: real tar/zip files built here, imported or refused with the member named."""

import io
import json
import stat
import tarfile
import tempfile
import zipfile

import pytest

from tasks.formats.archive import ArchiveError
from tasks.importing import import_path
from tasks.models import Task
from tasks.tests.data.builders import jsonl_line, write_task


@pytest.fixture(autouse=True)
def private_tmp(tmp_path, monkeypatch):
    """Extraction folders go here, so tests can check that nothing is left behind."""
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    yield
    assert list((tmp_path / "tmp").iterdir()) == []


def _batch(tmp_path):
    root = tmp_path / "src" / "batch"
    write_task(root, "task_a")
    write_task(root, "task_b")
    return root


def test_tar_gz_of_a_folder_of_task_folders(db, tmp_path):
    archive = tmp_path / "batch.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(_batch(tmp_path), arcname="batch")
    assert import_path(archive).as_dict() == {
        "imported": 2,
        "updated": 0,
        "unchanged": 0,
        "failed": [],
        "failed_count": 0,
    }
    assert set(Task.objects.values_list("external_id", flat=True)) == {"task_a", "task_b"}


def test_zip_of_task_folders_at_the_top(db, tmp_path):
    root = _batch(tmp_path)
    archive = tmp_path / "upload.bin"  # the name says nothing; the content decides
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(root.rglob("*")):
            zf.write(path, path.relative_to(root).as_posix())
    assert import_path(archive).as_dict()["imported"] == 2


def test_tar_of_one_task_folder_and_of_a_jsonl_file(db, tmp_path):
    folder = write_task(tmp_path / "src", "solo")
    with tarfile.open(tmp_path / "solo.tar", "w") as tar:
        tar.add(folder, arcname="solo")
    assert import_path(tmp_path / "solo.tar").imported == 1

    (tmp_path / "tasks.jsonl").write_text(json.dumps(jsonl_line(task_id="from-jsonl")) + "\n")
    with tarfile.open(tmp_path / "lines.tgz", "w:gz") as tar:
        tar.add(tmp_path / "tasks.jsonl", arcname="tasks.jsonl")
    assert import_path(tmp_path / "lines.tgz").imported == 1
    assert Task.objects.filter(external_id="from-jsonl").exists()


def _tar(tmp_path, *members) -> str:
    """A .tar.gz holding one good task folder and then the given (TarInfo, bytes|None) members."""
    path = tmp_path / "hostile.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        tar.add(write_task(tmp_path / "src", "task_ok"), arcname="task_ok")
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _info(name, kind=tarfile.REGTYPE, linkname=""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info


@pytest.mark.parametrize(
    "member, data, error",
    [
        (_info("../evil.txt"), b"x", "member '../evil.txt': '..' would place it outside the extraction folder"),
        (_info("task_ok/input_files/../../../evil.txt"), b"x", "'..' would place it outside"),
        (_info("/etc/evil.txt"), b"x", "member '/etc/evil.txt': absolute paths are not allowed"),
        (
            _info("task_ok/input_files/passwd", tarfile.SYMTYPE, "/etc/passwd"),
            None,
            "member 'task_ok/input_files/passwd' is a symbolic link; links are not allowed",
        ),
        (
            _info("task_ok/input_files/hard", tarfile.LNKTYPE, "task_ok/data_entry.json"),
            None,
            "member 'task_ok/input_files/hard' is a hard link; links are not allowed",
        ),
        (
            _info("task_ok/input_files/tty", tarfile.CHRTYPE),
            None,
            "member 'task_ok/input_files/tty' is a device or fifo",
        ),
        (_info("task_ok/input_files/disk", tarfile.BLKTYPE), None, "is a device or fifo"),
        (_info("task_ok/input_files/pipe", tarfile.FIFOTYPE), None, "is a device or fifo"),
    ],
)
def test_hostile_tar_members_are_refused(db, tmp_path, member, data, error):
    with pytest.raises(ArchiveError) as caught:
        import_path(_tar(tmp_path, (member, data)))
    assert error in str(caught.value)
    assert not (tmp_path / "evil.txt").exists() and not (tmp_path / "tmp" / "evil.txt").exists()
    assert not Task.objects.exists()  # an unsafe archive is refused as a whole


def _zip(tmp_path, name, data=b"x", mode=None) -> str:
    path = tmp_path / "hostile.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("task_ok/data_entry.json", json.dumps({"task_id": "task_ok", "user_query": "q"}))
        info = zipfile.ZipInfo(name)
        if mode is not None:
            info.create_system = 3
            info.external_attr = mode << 16
        zf.writestr(info, data)
    return path


@pytest.mark.parametrize(
    "name, mode, error",
    [
        ("../evil.txt", None, "member '../evil.txt': '..' would place it outside"),
        ("/etc/evil.txt", None, "member '/etc/evil.txt': absolute paths are not allowed"),
        ("C:/evil.txt", None, "member 'C:/evil.txt': absolute paths are not allowed"),
        ("task_ok\\..\\..\\evil.txt", None, "backslashes are not allowed"),
        ("task_ok/input_files/link", stat.S_IFLNK | 0o777, "member 'task_ok/input_files/link' is a symbolic link"),
        ("task_ok/input_files/pipe", stat.S_IFIFO | 0o644, "member 'task_ok/input_files/pipe' is a device or fifo"),
    ],
)
def test_hostile_zip_members_are_refused(db, tmp_path, name, mode, error):
    with pytest.raises(ArchiveError) as caught:
        import_path(_zip(tmp_path, name, b"/etc/passwd", mode))
    assert error in str(caught.value)
    assert not (tmp_path / "evil.txt").exists()
    assert not Task.objects.exists()


def test_zip_bomb_stops_at_the_expanded_size_bound(db, tmp_path, settings):
    settings.CLAWGYM_MAX_ARCHIVE_EXPANDED_BYTES = 1024 * 1024
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("task_ok/input_files/zeros.bin", b"\0" * (8 * 1024 * 1024))
    assert path.stat().st_size < 64 * 1024  # small on disk, 8 MiB expanded
    with pytest.raises(ArchiveError, match=r"expands to more than 1048576 bytes .*'task_ok/input_files/zeros.bin'"):
        import_path(path)


def test_tar_bomb_stops_at_the_expanded_size_bound(db, tmp_path, settings):
    settings.CLAWGYM_MAX_ARCHIVE_EXPANDED_BYTES = 1024 * 1024
    zeros = _info("task_ok/input_files/zeros.bin")
    with pytest.raises(ArchiveError, match="expands to more than 1048576 bytes"):
        import_path(_tar(tmp_path, (zeros, b"\0" * (3 * 1024 * 1024))))


def test_member_count_is_bounded(db, tmp_path, settings):
    settings.CLAWGYM_MAX_ARCHIVE_MEMBERS = 20
    members = [(_info(f"task_ok/input_files/f{i}.txt"), b"x") for i in range(30)]
    with pytest.raises(ArchiveError, match="more than 20 members"):
        import_path(_tar(tmp_path, *members))


def test_damaged_archive_is_reported(db, tmp_path):
    path = _tar(tmp_path)
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(ArchiveError, match="hostile.tar.gz could not be read|not a readable tar"):
        import_path(path)
    (tmp_path / "notes.txt").write_text("plain text")
    with pytest.raises(ArchiveError, match="notes.txt is not a tar or zip archive"):
        import_path(tmp_path / "notes.txt")


# --- one odd task in an archive fails alone ----------------------------------------------------------------


def _add(tar, name: str, data: bytes = b"") -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _tar_with_task_b_holding(tmp_path, name: str, *, encoding: str = "utf-8", fmt=tarfile.PAX_FORMAT):
    """batch/task_a and batch/task_b as a real archive would hold them, task_b with one more input file `name`."""
    archive = tmp_path / "batch.tar"
    with tarfile.open(archive, "w", format=fmt, encoding=encoding) as tar:
        for task_id in ("task_a", "task_b"):
            entry = {"task_id": task_id, "user_query": "Summarise notes.txt", "metadata": {"category": "writing"}}
            _add(tar, f"batch/{task_id}/data_entry.json", json.dumps(entry).encode())
            _add(tar, f"batch/{task_id}/input_files/notes.txt", b"meeting at 10\n")
            _add(tar, f"batch/{task_id}/reward/check.py", b"print('{}')\n")
        _add(tar, f"batch/task_b/input_files/{name}", b"x\n")
    return archive


def test_a_task_with_1500_nested_folders_fails_alone(db, tmp_path):
    archive = _tar_with_task_b_holding(tmp_path, "d/" * 1500 + "deep.txt")
    report = import_path(archive)
    assert report.imported == 1 and set(Task.objects.values_list("external_id", flat=True)) == {"task_a"}
    [failure] = report.failed
    assert failure["source"] == "task_b"
    assert "nested more than" in failure["error"] and "d/d/d/" in failure["error"]


def test_a_task_with_a_member_name_that_is_not_utf8_fails_alone(db, tmp_path):
    archive = _tar_with_task_b_holding(tmp_path, "caf\xe9.txt", encoding="latin-1", fmt=tarfile.GNU_FORMAT)
    report = import_path(archive)
    assert report.imported == 1 and set(Task.objects.values_list("external_id", flat=True)) == {"task_a"}
    [failure] = report.failed
    assert failure["source"] == "task_b"
    assert "not UTF-8" in failure["error"] and "caf\\xe9.txt" in failure["error"]


def test_a_zip_whose_utf8_flagged_name_is_not_utf8_is_refused_clearly(db, tmp_path):
    archive = tmp_path / "batch.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("batch/task_a/data_entry.json", json.dumps({"task_id": "task_a", "user_query": "q"}))
        zf.writestr("batch/task_a/input_files/caf\u00e9.txt", "x\n")  # non-ASCII: stored with the UTF-8 flag
    # The name's bytes made invalid UTF-8 (same length), as a broken zip tool writes them.
    archive.write_bytes(archive.read_bytes().replace("caf\u00e9".encode(), b"caf\xe9!"))
    with pytest.raises(ArchiveError, match="a member name is marked as UTF-8 but is not"):
        import_path(archive)


def test_a_member_name_kilobytes_long_fails_its_task_alone(db, tmp_path):
    archive = _tar_with_task_b_holding(tmp_path, ("x" * 200 + "/") * 30 + "long.txt")
    report = import_path(archive)
    assert report.imported == 1
    [failure] = report.failed
    assert failure["source"] == "task_b" and "path is longer than 500 characters" in failure["error"]
    assert len(failure["error"]) < 300  # the path is shown cut, not as 6 KB


def test_a_folder_on_disk_nested_too_deep_fails_its_task_alone(db, tmp_path):
    root = _batch(tmp_path)
    deep = root / "task_b" / "input_files" / "/".join(["d"] * 100)
    deep.mkdir(parents=True)
    (deep / "f.txt").write_text("x")
    report = import_path(root)
    assert report.imported == 1
    assert [f["source"] for f in report.failed] == ["task_b"]
    assert "folders are nested more than 64 deep" in report.failed[0]["error"]


def test_a_member_name_no_file_system_holds_is_refused_by_name(db, tmp_path):
    archive = _tar_with_task_b_holding(tmp_path, "n" * 300 + ".txt")
    with pytest.raises(ArchiveError, match="one of its names is longer than 255 bytes"):
        import_path(archive)
