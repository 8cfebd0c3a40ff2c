"""Background entry points of the task catalog."""

from pathlib import Path

from jobs.registry import job

from .importing import import_path, remove_upload


@job("tasks.import_upload", title="Import tasks")
def import_upload(ctx, *, upload_path: str, fmt: str | None = None) -> dict:
    """Import an uploaded folder archive or .jsonl file, then delete the upload (also when it fails).

    The upload is the job's only input, so a second delivery after a finished run fails saying the file
    is gone; running the same upload again imports nothing twice (identical tasks come back unchanged).
    """
    try:
        ctx.log(f"importing {Path(upload_path).name}" + (f" as {fmt}" if fmt else ""))
        report = import_path(
            upload_path,
            fmt=fmt,
            user=ctx.run.created_by,
            progress=lambda done, total: ctx.progress(done, total),
            on_failure=lambda source, error: ctx.log(f"failed: {source}: {error}"),
        )
    finally:
        remove_upload(upload_path)
    result = report.as_dict()
    ctx.log(
        f"imported {result['imported']}, updated {result['updated']}, unchanged {result['unchanged']}, "
        f"failed {len(result['failed'])}"
    )
    return result
