"""Sanity checks of a revision's checker: the automated verification quality assessment.

The checker runs on three workspaces:
- empty: no files at all (only the checker's own reward/);
- initial: the input files, no outputs;
- scaffold: the input files plus a placeholder at every output path the instruction names (`{}` for .json,
  a header-only CSV, `# placeholder` for .md, an empty file otherwise);
then on the workspaces of the moves lazy agents really make (tasks.lazy_workspaces: the inputs emptied or deleted,
stubs of every named output, the inputs copied to the outputs, a final message claiming success, a workspace written
by the judge model), and, when the task has a reference solution, on the initial workspace with the solution applied.
The runs are independent, each in its own workspace and sandbox under the checker's limits, so they run side by side
(settings.CLAWGYM_SANITY_RUNS_AT_ONCE at a time).

All of them but the solution are what a lazy agent leaves behind, so what the checker pays on them is the *lazy
score*, and the sub-scores above 0 there are the checks that pay out for no work. Each run keeps the end of its
stdout and stderr on the report, so that a checker swallowing its own exceptions shows.

Findings: `crashed` (no score could be read on one of the three base workspaces; a crash on a move's workspace
scores 0 there and is only noted), `lazy_score` (the most a lazy agent earns: the highest score of every lazy
workspace, `lazy_best` the workspace that earned it), `over_lenient` (the lazy score is above the tolerance),
`solvable` (the solution scores 1.0; None without a solution). A checker that writes into the workspace it judges (e.g. it runs the agent's own
script) is a warning recorded with each run, not a crash. Each check is stored as a SanityReport. A sandbox that
cannot run at all raises SanityUnavailable instead: that says nothing of the checker.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import posixpath
import re
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, as_completed, wait
from dataclasses import dataclass

from django.conf import settings

import jobs
from jobs.scratch import scratch_folder
from sandbox import Backend, Limits, Workspace

from . import lazy_workspaces
from .job_kinds import SANITY_JOB
from .models import SanityReport, TaskRevision
from .paths import TaskFileError, normalize_path
from .verification import REWARD_DIR, CheckerSpec, CheckResult, CheckStatus, checker_backend, run_checker

RUN_KINDS = SanityReport.LAZY_RUNS  # empty, initial, scaffold: always run, a crash there is a crashed checker
SOLUTION_RUN = "solution"
OUTPUT_TAIL = 8192  # of each run's stdout and stderr kept on the report (run_checker keeps less still)
SOLVED_SCORE = 1.0 - 1e-9  # a solution must score 1.0; the tolerance only absorbs float noise

# File name extensions that make a token of the instruction a file path. A closed list, so that "e.g." or a
# domain name is never taken for a file.
FILE_EXTENSIONS = frozenset(
    "json jsonl csv tsv md markdown txt text yaml yml toml ini cfg conf env xml html htm css js mjs ts py ipynb "
    "sh bash sql log ics vcf eml rst tex pdf docx xlsx pptx odt ods png jpg jpeg gif svg zip gz tar patch diff".split()
)
# A path-like token: optional ./ or an absolute prefix, folders, a name, a known-looking extension. The look-arounds
# keep it from starting or ending inside a longer token (a URL, a longer path, "out.csv.bak").
PATH_TOKEN = re.compile(
    r"(?<![\w./~@:-])((?:\./|/)?(?:[\w.][\w.-]*/)*[\w][\w.-]*\.([A-Za-z][A-Za-z0-9]{0,9}))(?![\w/-]|\.\w)"
)
QUOTED = re.compile(r"`([^`\n]+)`")
# Where checkers may see the workspace under an absolute path: such a prefix is stripped, other absolute paths
# are outside the workspace and ignored.
WORKSPACE_PREFIXES = ("/root/.openclaw/workspace/", "/workspace/")
# "columns id,owner,task,due" / "columns: a, b, c": the header a scaffold CSV gets.
COLUMNS = re.compile(r"\bcolumns?\b[\s:]*((?:[A-Za-z_][\w ]*,\s*)+[A-Za-z_]\w*)")


class SanityUnavailable(RuntimeError):
    """The sandbox could not run the checker at all; no report is stored (it would blame the checker)."""


# --- the scaffold ----------------------------------------------------------------------------------------------


def output_paths(instruction: str, input_paths: Iterable[str]) -> list[str]:
    """Workspace paths the instruction names that are not input files, in order of first mention.

    Tokens that only repeat an input file's name (`policy.md` for `docs/policy.md`), paths under reward/, paths
    outside the workspace, and paths that clash with the input files' folders are left out.
    """
    inputs = set(input_paths)
    folders = {posixpath.dirname(p) for p in inputs}
    folders |= {f.rsplit("/", i)[0] for f in list(folders) for i in range(1, f.count("/") + 1)}
    found: list[str] = []
    for token in _path_tokens(instruction):
        path = _workspace_path(token)
        if path is None or path in found or path in inputs or path in folders:
            continue
        if path.split("/")[0] == REWARD_DIR or any(i.endswith("/" + path) for i in inputs):
            continue
        parents = {path.rsplit("/", i)[0] for i in range(1, path.count("/") + 1)}
        if parents & inputs:
            continue  # a file of that name is in the way of the folder
        found.append(path)
    return found


def _path_tokens(text: str) -> Iterator[str]:
    quoted_spans = []
    for match in QUOTED.finditer(text):
        quoted = match.group(1).strip()
        if " " in quoted and "." in quoted and quoted.rsplit(".", 1)[1].lower() in FILE_EXTENSIONS:
            quoted_spans.append(match.span())
            yield quoted  # a name with spaces counts only when quoted, and then as a whole
    for match in PATH_TOKEN.finditer(text):
        inside_quoted = any(start <= match.start() < end for start, end in quoted_spans)
        if not inside_quoted and match.group(2).lower() in FILE_EXTENSIONS:
            yield match.group(1)


def _workspace_path(token: str) -> str | None:
    if token.startswith("./"):
        token = token[2:]
    if token.startswith("/"):
        prefix = next((p for p in WORKSPACE_PREFIXES if token.startswith(p)), None)
        if prefix is None:
            return None
        token = token[len(prefix) :]
    try:
        return normalize_path(token)
    except TaskFileError:
        return None


def placeholder(path: str, instruction: str = "", inputs: dict[str, bytes] | None = None) -> bytes:
    """The scaffold's stand-in for an output: the least a lazy agent would write there."""
    extension = path.rsplit(".", 1)[-1].lower()
    if extension == "json":
        return b"{}\n"
    if extension in ("csv", "tsv"):
        return (_csv_header(path, instruction, inputs or {}) + "\n").encode()
    if extension in ("md", "markdown"):
        return b"# placeholder\n"
    return b""


def _csv_header(path: str, instruction: str, inputs: dict[str, bytes]) -> str:
    """The columns the instruction gives after naming `path`, else those of a CSV beside it, else `column`."""
    at = instruction.find(path)
    if at >= 0:
        match = COLUMNS.search(instruction, at)
        if match:
            return ",".join(name.strip() for name in match.group(1).split(","))
    folder = posixpath.dirname(path)
    for other, data in sorted(inputs.items()):
        if posixpath.dirname(other) == folder and other.endswith((".csv", ".tsv")):
            first = data.decode("utf-8", "replace").splitlines()[:1]
            if first and first[0].strip():
                return first[0].strip()
    return "column"


# --- running the checks ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SanityMaterial:
    """What a sanity check needs from a revision, read from the database once (threads then need none)."""

    revision_id: int
    checker: CheckerSpec
    inputs: dict[str, bytes]
    solution: dict[str, bytes]
    scaffold_paths: list[str]
    # The judge model's lazy workspace: (files, final message, why there is none); see with_llm_workspace.
    llm_lazy: tuple = (None, "", "no model-written workspace was asked for")

    @classmethod
    def from_revision(cls, revision: TaskRevision) -> SanityMaterial:
        files = {"input": {}, "solution": {}}
        for f in revision.files.exclude(role="reward").select_related("blob"):
            files[f.role][f.path] = f.blob.content
        return cls(
            revision_id=revision.pk,
            checker=CheckerSpec.from_revision(revision),
            inputs=files["input"],
            solution=files["solution"],
            scaffold_paths=output_paths(revision.instruction, files["input"]),
        )

    def lazy_plan(self) -> lazy_workspaces.LazyPlan:
        """The lazy workspaces, their final messages and the moves not run (tasks.lazy_workspaces.plan)."""
        scaffold = dict(self.inputs)
        for path in self.scaffold_paths:
            scaffold[path] = placeholder(path, self.checker.instruction, self.inputs)
        return lazy_workspaces.plan(
            self.inputs,
            self.scaffold_paths,
            scaffold,
            lambda path: _csv_header(path, self.checker.instruction, self.inputs),
            llm=self.llm_lazy,
            solved={**self.inputs, **self.solution} if self.solution else None,
        )

    def workspaces(self, lazy: lazy_workspaces.LazyPlan | None = None) -> dict[str, dict[str, bytes]]:
        """{run name: files}; the solution run only when there is a solution."""
        found = dict((lazy or self.lazy_plan()).workspaces)
        if self.solution:
            found[SOLUTION_RUN] = {**self.inputs, **self.solution}
        return found


def with_llm_workspace(material: SanityMaterial, revision: TaskRevision) -> SanityMaterial:
    """The material with the judge model's lazy workspace (tasks.lazy_workspaces.llm_lazy_workspace), asked now:
    it needs the database, so never from the threads that run the checker."""
    found = lazy_workspaces.llm_lazy_workspace(
        material.checker.instruction,
        material.inputs,
        material.scaffold_paths,
        subject=f"revision:{revision.pk}",
        served=revision,
    )
    return dataclasses.replace(material, llm_lazy=found)


@dataclass(frozen=True)
class SanityOutcome:
    runs: dict[str, CheckResult]  # every lazy workspace run (RUN_KINDS first), and SOLUTION_RUN with a solution
    tolerance: float
    # What the report keeps of each lazy workspace (lazy_workspaces.describe), and the moves not run, with why.
    workspaces: dict[str, dict] = dataclasses.field(default_factory=dict)
    not_run: dict[str, str] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, lazy: lazy_workspaces.LazyPlan, runs: dict[str, CheckResult], tolerance: float) -> SanityOutcome:
        """The outcome of the checker's `runs` on the workspaces `lazy` planned (and on the solution's)."""
        described = {
            kind: lazy_workspaces.describe(kind, files, lazy.messages.get(kind, ""))
            for kind, files in lazy.workspaces.items()
        }
        return cls(runs=runs, tolerance=tolerance, workspaces=described, not_run=dict(lazy.not_run))

    @property
    def crashed(self) -> bool:
        return any(not self.runs[kind].ok for kind in RUN_KINDS)

    @property
    def lazy_kinds(self) -> list[str]:
        return [kind for kind in self.runs if kind != SOLUTION_RUN]

    @property
    def lazy_score(self) -> float:
        """The most the checker pays a lazy agent: its highest score on any lazy workspace."""
        return max(self.runs[kind].score for kind in self.lazy_kinds)

    @property
    def lazy_best(self) -> str:
        """The lazy workspace that earned the lazy score (the first, when several did)."""
        return next(kind for kind in self.lazy_kinds if self.runs[kind].score == self.lazy_score)

    @property
    def over_lenient(self) -> bool:
        return self.lazy_score > self.tolerance

    @property
    def runtime(self) -> str:
        return next((run.runtime for run in self.runs.values() if run.runtime), "")

    @property
    def solvable(self) -> bool | None:
        run = self.runs.get(SOLUTION_RUN)
        return None if run is None else run.ok and run.score >= SOLVED_SCORE


def evaluate(
    material: SanityMaterial,
    *,
    backend: Backend | None = None,
    limits: Limits | None = None,
    tolerance: float | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    runs_at_once: int | None = None,
) -> SanityOutcome:
    """Run the checker on each workspace (no database). Raises SanityUnavailable when the sandbox cannot run.

    The runs are independent (each its own workspace and sandbox, with its own limits), so they run side by side,
    `runs_at_once` of them (default settings.CLAWGYM_SANITY_RUNS_AT_ONCE). `progress` is called from the calling
    thread only, as runs end.
    """
    backend = backend or checker_backend()
    tolerance = settings.CLAWGYM_SANITY_TOLERANCE if tolerance is None else tolerance
    lazy = material.lazy_plan()
    workspaces = material.workspaces(lazy)
    at_once = min(max(1, runs_at_once or settings.CLAWGYM_SANITY_RUNS_AT_ONCE), len(workspaces))

    def run(kind: str) -> CheckResult:
        # A held scratch folder (jobs.scratch): should this worker be killed, whoever finds it dead removes it.
        with scratch_folder("sanity") as folder, Workspace.create(workspaces[kind], base_dir=folder) as workspace:
            message = lazy.messages.get(kind, "")
            return run_checker(material.checker, workspace, message, [], backend=backend, limits=limits)

    results = {}
    if progress:
        progress(0, len(workspaces), f"checker on the {', '.join(workspaces)} workspaces")
    if at_once == 1:
        for kind in workspaces:
            results[kind] = run(kind)
            if progress and len(results) < len(workspaces):
                progress(len(results), len(workspaces), f"checker on the {kind} workspace ran")
    else:
        with ThreadPoolExecutor(at_once, thread_name_prefix="sanity-run") as pool:
            futures = {pool.submit(run, kind): kind for kind in workspaces}
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                if progress and len(results) < len(workspaces):
                    progress(len(results), len(workspaces), f"checker on the {futures[future]} workspace ran")
    runs = {kind: results[kind] for kind in workspaces}  # in the workspaces' order, whatever order they ended in
    for kind, result in runs.items():
        if result.status is CheckStatus.SANDBOX_ERROR:
            raise SanityUnavailable(f"the sandbox could not run the checker ({kind} workspace): {result.reason}")
    if progress:
        progress(len(workspaces), len(workspaces), "done")
    return SanityOutcome.of(lazy, runs, tolerance)


def report_fields(material: SanityMaterial, outcome: SanityOutcome) -> dict:
    """A SanityReport's fields but its revision and job, as JSON: what store_report stores, and what the synthesis
    verify stage keeps with its draft until the task it checked is in the catalog."""
    solution = outcome.runs.get(SOLUTION_RUN)
    return {
        "runs": {kind: run_fields(outcome.runs[kind]) for kind in outcome.lazy_kinds},
        "solution_run": run_fields(solution) if solution else None,
        "scaffold_paths": list(material.scaffold_paths),
        "crashed": outcome.crashed,
        "over_lenient": outcome.over_lenient,
        "lazy_score": outcome.lazy_score,
        "lazy_best": outcome.lazy_best,
        "lazy_workspaces": outcome.workspaces,
        "moves_not_run": outcome.not_run,
        "solvable": outcome.solvable,
        "tolerance": outcome.tolerance,
        "backend": next(iter(outcome.runs.values())).backend,
        "runtime": outcome.runtime[:80],
        "isolated": all(run.isolated for run in outcome.runs.values()),
    }


def run_fields(run: CheckResult) -> dict:
    """One run as the report keeps it: CheckResult.as_dict, with the end of its stdout and stderr whatever its status
    (a checker that swallows an exception into a quiet 0 or 1 shows it there)."""
    return {**run.as_dict(), "stdout": run.stdout[-OUTPUT_TAIL:], "stderr": run.stderr[-OUTPUT_TAIL:]}


def material_digest(material: SanityMaterial) -> str:
    """sha256 over what a check ran on (the checker's entry and files, the inputs, the solution, the scaffold's
    paths): a report made on material of this digest is a report of any revision with the same."""
    digest = hashlib.sha256(json.dumps([material.checker.entry, material.scaffold_paths]).encode())
    for role, files in (
        ("reward", material.checker.reward_files),
        ("input", material.inputs),
        ("solution", material.solution),
    ):
        for path in sorted(files):
            digest.update(f"\0{role}\0{path}\0{len(files[path])}\0".encode())
            digest.update(files[path])
    return digest.hexdigest()


def store_report(revision: TaskRevision, material: SanityMaterial, outcome: SanityOutcome, *, job_run=None):
    return SanityReport.objects.create(revision=revision, job_run=job_run, **report_fields(material, outcome))


def check_revision(revision: TaskRevision, *, job_run=None, backend=None, tolerance=None, progress=None):
    """Sanity-check one revision's checker and store the SanityReport. Raises SanityUnavailable."""
    material = with_llm_workspace(SanityMaterial.from_revision(revision), revision)
    outcome = evaluate(material, backend=backend, tolerance=tolerance, progress=progress)
    return store_report(revision, material, outcome, job_run=job_run)


def check_here(
    revisions: Iterable[TaskRevision],
    *,
    workers: int,
    backend: Backend | None = None,
    tolerance: float | None = None,
    runs_at_once: int | None = None,
) -> Iterator[tuple[TaskRevision, SanityReport | None, str]]:
    """Check revisions in this process, `workers` checks at a time, each with its runs side by side (`runs_at_once`,
    as evaluate); yields (revision, report, error) as each ends.

    The database is used from the calling thread only: threads run sandboxes, this loop reads and stores.
    A bounded number of revisions is in flight, so memory does not grow with the catalog.
    """
    backend = backend or checker_backend()
    pending = {}
    revisions = iter(revisions)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sanity") as pool:
        while True:
            for revision in revisions:
                material = with_llm_workspace(SanityMaterial.from_revision(revision), revision)
                future = pool.submit(
                    evaluate, material, backend=backend, tolerance=tolerance, runs_at_once=runs_at_once
                )
                pending[future] = (revision, material)
                if len(pending) >= 2 * workers:
                    break
            if not pending:
                return
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                revision, material = pending.pop(future)
                try:
                    outcome = future.result()
                except SanityUnavailable as exc:
                    yield revision, None, str(exc)
                except Exception as exc:  # e.g. the task's files clash (a file where a folder must be)
                    yield revision, None, f"{type(exc).__name__}: {exc}"
                else:
                    yield revision, store_report(revision, material, outcome), ""


# --- solvability ---------------------------------------------------------------------------------------------

_solvability_hook: Callable[[TaskRevision], dict] | None = None


def register_solvability(hook: Callable[[TaskRevision], dict]) -> None:
    """Name the function that proves a revision solvable (review.solvability.solvability, registered by
    ReviewConfig.ready: rollouts are evaluation's, which this app may not import)."""
    global _solvability_hook
    _solvability_hook = hook


def solvability_of(revision: TaskRevision) -> dict:
    """{"proven", "kind", "score", "description", ...}: the registered hook's answer, else what the revision's latest
    sanity report alone proves (its reference solution scoring 1)."""
    if _solvability_hook is not None:
        return _solvability_hook(revision)
    report = SanityReport.latest_for(revision).first()
    run = report.solution_run if report is not None else None
    if run and run.get("status") == "ok" and run.get("score", 0.0) >= SOLVED_SCORE:
        return {"proven": True, "kind": SOLUTION_RUN, "score": run["score"], "report_id": report.pk}
    return {"proven": False, "kind": None}


def start_sanity_check(task, *, user):
    """Queue a sanity check of the task's current revision (on the sandbox queue); returns its JobRun.

    Raises ValueError when the task has no revision, jobs.engine.JobEngineError when the engine refuses the job.
    """
    if task.current_revision_id is None:
        raise ValueError(f"{task.external_id} has no revision to check")
    return jobs.enqueue(SANITY_JOB, created_by=user, revision_id=task.current_revision_id)
