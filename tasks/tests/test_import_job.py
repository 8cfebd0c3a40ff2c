"""The upload import: start_upload_import stores the file and enqueues the job; the job imports it."""

import io
import tarfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from jobs import runner
from jobs.models import JobRun
from tasks.formats import FormatError
from tasks.importing import start_upload_import
from tasks.models import Task
from tasks.tests.data.builders import write_task


@pytest.fixture
def upload_dir(settings, tmp_path):
    settings.CLAWGYM_UPLOAD_DIR = tmp_path / "uploads"
    return settings.CLAWGYM_UPLOAD_DIR


def _tgz_of(folder) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(folder, arcname=folder.name)
    return buf.getvalue()


def _start(upload, admin_user, django_capture_on_commit_callbacks, **kw) -> JobRun:
    # The engine hand-off waits for commit; it is captured and not run, and the job is executed in-process.
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run = start_upload_import(upload, user=admin_user, **kw)
    assert len(callbacks) == 1
    return run


def test_upload_is_stored_and_job_imports_it(db, tmp_path, upload_dir, admin_user, django_capture_on_commit_callbacks):
    src = tmp_path / "src" / "batch"
    write_task(src, "task_a")
    write_task(src, "task_b")
    (src / "broken").mkdir()
    content = _tgz_of(src)
    upload = SimpleUploadedFile("../../My Batch!.tar.gz", content, content_type="application/gzip")

    run = _start(upload, admin_user, django_capture_on_commit_callbacks)

    assert run.kind == "tasks.import_upload" and run.created_by == admin_user
    stored = upload_dir / run.params["upload_path"].split("/")[-2] / "My_Batch_.tar.gz"
    assert run.params == {"upload_path": str(stored), "fmt": None}
    assert stored.read_bytes() == content

    assert runner.execute(run.pk) == JobRun.Status.SUCCEEDED
    run.refresh_from_db()
    assert run.result == {
        "imported": 2,
        "updated": 0,
        "unchanged": 0,
        "failed": [{"source": "broken", "error": "broken: not a task folder: it has no data_entry.json"}],
        "failed_count": 1,
    }
    assert (run.progress_done, run.progress_total) == (3, 3)
    assert "failed: broken: broken: not a task folder" in run.log_tail
    assert "imported 2, updated 0, unchanged 0, failed 1" in run.log_tail
    assert not stored.exists() and not stored.parent.exists()
    task = Task.objects.get(external_id="task_a")
    assert task.source == Task.Source.IMPORTED
    assert task.current_revision.author_user == admin_user


def test_upload_of_jsonl_with_explicit_format(db, upload_dir, admin_user, django_capture_on_commit_callbacks):
    line = b'{"task_id": "j1", "prompt": "Write hello to out.txt.", "hook_code": "print(1)"}\n'
    run = _start(
        SimpleUploadedFile("tasks.jsonl", line), admin_user, django_capture_on_commit_callbacks, fmt="clawgym-jsonl"
    )
    assert run.params["fmt"] == "clawgym-jsonl"
    assert runner.execute(run.pk) == JobRun.Status.SUCCEEDED
    run.refresh_from_db()
    assert run.result["imported"] == 1
    assert Task.objects.filter(external_id="j1").exists()


def test_unsafe_archive_fails_the_job_and_the_upload_is_still_deleted(
    db, upload_dir, admin_user, django_capture_on_commit_callbacks
):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("../escape.txt")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"bad"))
    run = _start(SimpleUploadedFile("evil.tgz", buf.getvalue()), admin_user, django_capture_on_commit_callbacks)
    stored = run.params["upload_path"]

    assert runner.execute(run.pk) == JobRun.Status.FAILED
    run.refresh_from_db()
    assert "member '../escape.txt'" in run.error
    assert not (upload_dir / stored.split("/")[-2]).exists()
    assert not Task.objects.exists()


def test_unknown_format_is_refused_before_anything_is_stored(db, upload_dir, admin_user):
    with pytest.raises(FormatError, match="unknown task format 'csv'"):
        start_upload_import(SimpleUploadedFile("x.jsonl", b"{}"), fmt="csv", user=admin_user)
    assert not upload_dir.exists() or not any(upload_dir.iterdir())
    assert not JobRun.objects.exists()
