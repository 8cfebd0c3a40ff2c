"""Workspace: materialise, snapshot, diff, and stay safe against what untrusted code leaves behind."""

from __future__ import annotations

import hashlib
import os
import stat

import pytest

from sandbox import Entry, Snapshot, Workspace, WorkspaceError
from sandbox.testing import as_unprivileged


@pytest.fixture
def ws():
    workspace = Workspace.create({"notes.md": b"# notes\n", "src/app.py": b"print(1)\n", "src/deep/x.json": b"{}"})
    yield workspace
    workspace.cleanup()


def test_create_materialises_files_in_a_private_folder(ws):
    assert (ws.root / "notes.md").read_bytes() == b"# notes\n"
    assert (ws.root / "src/deep/x.json").read_bytes() == b"{}"
    assert stat.S_IMODE(ws.root.stat().st_mode) == 0o700
    assert ws.root.name.startswith("clawgym-ws-")


def test_create_under_a_base_dir(tmp_path):
    with Workspace.create({"a": b"1"}, base_dir=tmp_path / "nested") as ws:
        assert ws.root.parent == tmp_path / "nested"
    assert not ws.root.exists()


def test_files_and_snapshot_list_everything(ws):
    assert ws.files() == {"notes.md": b"# notes\n", "src/app.py": b"print(1)\n", "src/deep/x.json": b"{}"}
    snap = ws.snapshot()
    assert snap["src"] == Entry("dir")
    assert snap["src/deep"] == Entry("dir")
    assert snap == ws.initial
    assert not snap.truncated


@pytest.mark.parametrize(
    "path",
    ["/etc/passwd", "../escape", "a/../../b", "a//b", "./a", "", "a\0b", "a/.", "dir/"],
)
def test_unsafe_paths_are_refused(path, tmp_path):
    with pytest.raises(WorkspaceError):
        Workspace.create({path: b"x"}, base_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []  # nothing half-made left behind


def test_a_path_cannot_be_both_file_and_folder(tmp_path):
    with pytest.raises(WorkspaceError, match="both a file and a folder"):
        Workspace.create([("a", b"1"), ("a/b", b"2")], base_dir=tmp_path)
    with pytest.raises(WorkspaceError, match="both a file and a folder"):
        Workspace.create([("a/b", b"2"), ("a", b"1")], base_dir=tmp_path)


def test_contents_must_be_bytes(tmp_path):
    with pytest.raises(WorkspaceError, match="must be bytes"):
        Workspace.create({"a.txt": "text"}, base_dir=tmp_path)


def test_diff_reports_added_modified_deleted_with_contents(ws):
    (ws.root / "notes.md").write_bytes(b"# notes\nmore\n")
    (ws.root / "src/app.py").unlink()
    (ws.root / "out").mkdir()
    (ws.root / "out/report.csv").write_bytes(b"x,y\n")
    diff = ws.diff()
    assert diff.added == {"out": Entry("dir"), "out/report.csv": Entry.file(b"x,y\n")}
    assert diff.modified == {"notes.md": Entry.file(b"# notes\nmore\n")}
    assert diff.deleted == {"src/app.py": Entry.file(b"print(1)\n")}
    assert not diff.empty


def test_diff_against_plain_files_mapping(ws):
    assert ws.diff({"notes.md": b"# notes\n", "src/app.py": b"print(1)\n", "src/deep/x.json": b"{}"}).empty
    diff = ws.diff({"notes.md": b"old"})
    assert diff.modified == {"notes.md": Entry.file(b"# notes\n")}
    assert set(diff.added) == {"src", "src/app.py", "src/deep", "src/deep/x.json"}


def test_diff_sees_an_executable_bit(ws):
    os.chmod(ws.root / "src/app.py", 0o755)
    assert ws.diff().modified == {"src/app.py": Entry.file(b"print(1)\n", executable=True)}


def test_diff_without_initial_needs_one(tmp_path):
    ws = Workspace(tmp_path)
    with pytest.raises(WorkspaceError, match="pass the initial snapshot"):
        ws.diff()
    assert ws.diff({}).added == {}


def test_symlinks_are_recorded_never_followed(ws, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"host secret")
    outside_dir = tmp_path / "outside"
    outside_dir.mkdir()
    (outside_dir / "inner.txt").write_bytes(b"also secret")
    os.symlink(secret, ws.root / "link.txt")
    os.symlink(outside_dir, ws.root / "linkdir")
    os.symlink("/nonexistent/dangling", ws.root / "dangling")
    snap = ws.snapshot()
    assert snap["link.txt"] == Entry("symlink", target=str(secret))
    assert snap["linkdir"] == Entry("symlink", target=str(outside_dir))
    assert snap["dangling"] == Entry("symlink", target="/nonexistent/dangling")
    assert not any(path.startswith("linkdir/") for path in snap)
    assert b"secret" not in b"".join(snap.files.values())


def test_special_files_are_recorded_not_opened(ws):
    os.mkfifo(ws.root / "pipe")  # opening it for reading would block forever
    assert ws.snapshot()["pipe"] == Entry("special", detail="fifo")


def test_too_large_files_keep_size_and_hash_only(ws):
    big = os.urandom(3000)
    (ws.root / "big.bin").write_bytes(big)
    snap = ws.snapshot(max_file_bytes=1000)
    assert snap["big.bin"] == Entry("too_large", size=3000, sha256=hashlib.sha256(big).hexdigest())
    assert "big.bin" not in snap.files
    assert set(snap.too_large) == {"big.bin"}
    assert snap["notes.md"].kind == "file"


def test_total_budget_bounds_what_is_read(ws):
    for name in "abcd":
        (ws.root / f"{name}.txt").write_bytes(b"x" * 400)
    snap = ws.snapshot(max_total_bytes=1000)
    kept = sum(len(content) for content in snap.files.values())
    assert kept <= 1000
    assert {"c.txt", "d.txt"} <= set(snap.too_large)  # read in sorted order until the budget ran out


def test_changes_inside_too_large_files_are_seen(ws):
    (ws.root / "big.bin").write_bytes(b"a" * 5000)
    before = ws.snapshot(max_file_bytes=100)
    (ws.root / "big.bin").write_bytes(b"b" * 5000)
    assert before != ws.snapshot(max_file_bytes=100)


def test_entry_count_is_bounded(ws):
    for i in range(30):
        (ws.root / f"f{i:02}").write_bytes(b"")
    snap = ws.snapshot(max_entries=10)
    assert len(snap) == 10
    assert snap.truncated


def test_snapshot_from_files_matches_the_disk(ws):
    assert Snapshot.from_files(ws.files()) == ws.snapshot()


def test_cleanup_removes_folders_the_code_locked(ws):
    locked = ws.root / "src/deep"
    os.chmod(locked, 0o500)
    os.chmod(ws.root / "src", 0o500)
    ws.cleanup()
    assert not ws.root.exists()
    ws.cleanup()  # twice is fine


def test_chown_tree_does_not_follow_links(ws, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")
    target = tmp_path / "host-file"
    target.write_bytes(b"x")
    os.symlink(target, ws.root / "link")
    ws.chown_tree(65534, 65534)
    assert (ws.root / "src/app.py").stat().st_uid == 65534
    assert ws.root.stat().st_uid == 65534
    assert target.stat().st_uid == os.geteuid()  # the link's target on the host is untouched


def test_workspace_must_exist(tmp_path):
    with pytest.raises(WorkspaceError, match="does not exist"):
        Workspace(tmp_path / "missing")


def test_unreadable_paths_are_recorded_not_fatal_for_a_non_root_caller():
    def scenario():
        ws = Workspace.create({"notes.md": b"x", "src/deep/x.json": b"{}"})
        os.chmod(ws.root / "notes.md", 0)
        os.chmod(ws.root / "src/deep", 0)
        os.chmod(ws.root / "src", 0o500)
        snap = ws.snapshot()
        ws.cleanup()
        return snap["notes.md"], snap["src/deep"], ws.root.exists()

    assert as_unprivileged(scenario) == (
        Entry("special", detail="unreadable file"),
        Entry("special", detail="unreadable folder"),
        False,
    )
