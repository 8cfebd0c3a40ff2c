"""Transcript scans of evaluation runs (evaluation.scanners): run the scanners over a run's rollouts and store what
they find, queue a scan as a job, and the figures pages, the API, the export and `scan_run --json` show.

A scan replaces the run's findings of the scanners it ran (a scan of the judge alone keeps the rule-based findings);
each scan is kept as a RunScan row, so the run says which scanners have looked at it and when.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict

from django.db import transaction
from django.db.models import Count

import jobs
from accounts.roles import ADMIN, has_role
from llm.models import ModelEndpoint

from ..job_kinds import SCAN_JOB
from ..models import EvalRun, Rollout, RunScan, ScanFinding
from ..scanners import DEFAULT_SCANNERS, SCANNERS, ScanError, check_names, get_scanner
from ..scanners.view import rollout_view

log = logging.getLogger(__name__)

# The rollouts a scan reads: those whose agent ran to an end. An infrastructure failure is not the model's doing.
SCANNED_STATUSES = (Rollout.Status.SCORED, Rollout.Status.INCOMPLETE)
CHUNK = 100  # rollouts read at a time: a run of thousands is never in memory at once


class ScanRefused(ValueError):
    """A scan cannot be asked for: an unknown scanner or judge, or a user without the role. The message says why."""


def chosen_scanners(names=None) -> list[str]:
    """The scanners asked for by name ("all": every one), or the rule-based ones; ScanRefused for an unknown one."""
    names = list(names or DEFAULT_SCANNERS)
    if "all" in names:
        names = list(SCANNERS)
    try:
        return check_names(names)
    except ValueError as exc:
        raise ScanRefused(str(exc)) from None


def judge_by_name(name: str | None) -> ModelEndpoint | None:
    if not name:
        return None
    endpoint = ModelEndpoint.objects.filter(name=name).first()
    if endpoint is None:
        raise ScanRefused(f"no model endpoint named {name!r}")
    if not endpoint.enabled:
        raise ScanRefused(f"the model endpoint {name!r} is disabled")
    return endpoint


def request_scan(run: EvalRun, *, user, scanners=None, judge: str | None = None):
    """Queue an evaluation.scan_run job for the run (admins: it starts background work, and a judge costs calls).
    Returns the JobRun; ScanRefused when the user may not or the scanners or judge are unknown."""
    if user is not None and not has_role(user, ADMIN):
        raise ScanRefused("scanning a run needs the admin role")
    names = chosen_scanners(scanners)
    judge_by_name(judge)
    params = {"run_id": run.pk, "scanners": names}
    if judge:
        params["judge"] = judge
    return jobs.enqueue(SCAN_JOB, created_by=user, **params)


def scan_finished_run(run_id: int) -> None:
    """Queue the rule-based scan of a run that has just finished. An engine that refuses the job is logged, never
    raised: the run has finished all the same, and the scan can be asked for again."""
    try:
        jobs.enqueue(SCAN_JOB, run_id=run_id, scanners=list(DEFAULT_SCANNERS))
    except Exception as exc:  # JobEngineError, or the kind not registered in a process without the jobs
        log.warning("evaluation run %s: its transcript scan was not queued: %s", run_id, exc)


def scan_run(run: EvalRun, *, user, scanners=None, judge: ModelEndpoint | None = None, on_progress=None) -> RunScan:
    """Scan the run's finished rollouts with the scanners named (default: the rule-based ones) and store what they
    find, replacing the run's earlier findings of those scanners. A scanner that cannot scan a rollout (its judge
    failed) is recorded in the scan's errors and the others carry on."""
    found, errors, judge_name, instances = [], [], "", []
    for name in chosen_scanners(scanners):
        scanner = get_scanner(name, endpoint=judge)
        if scanner.judged:
            try:
                judge_name = scanner.endpoint.name
            except ScanError as exc:  # no judge to ask: the scan goes on without it, and says so
                errors.append({"rollout": None, "scanner": name, "error": str(exc)[:500]})
                continue
        instances.append(scanner)
    names = [scanner.name for scanner in instances]
    rollouts = (
        run.rollouts.filter(status__in=SCANNED_STATUSES)
        .select_related("revision__task", "endpoint")
        .defer("agent_account", "log_tail", "previous_attempts", "rubric_judgements")  # never read: kept out of memory
        .order_by("revision__task__external_id", "repeat_index", "id")
    )
    total = rollouts.count()
    for done, rollout in enumerate(rollouts.iterator(chunk_size=CHUNK), start=1):
        view = rollout_view(rollout)
        for scanner in instances:
            try:
                found.extend(scanner.scan(view))
            except ScanError as exc:
                errors.append({"rollout": rollout.pk, "scanner": scanner.name, "error": str(exc)[:500]})
        if on_progress:
            on_progress(done, total)
    with transaction.atomic():
        ScanFinding.objects.filter(run=run, scanner__in=names).delete()
        scan = RunScan.objects.create(
            run=run,
            scanners=names,
            judge=judge_name,
            rollouts=total,
            findings=len(found),
            errors=errors,
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )
        ScanFinding.objects.bulk_create(
            ScanFinding(
                run=run,
                scan=scan,
                rollout_id=f.rollout,
                scanner=f.scanner,
                summary=f.summary,
                evidence=f.evidence,
                step=f.step,
                model_call_id=f.model_call,
                tool=f.tool[:100],
                path=f.path[:1000],
            )
            for f in found
        )
    return scan


# --- what the pages, the API and the commands show ---------------------------------------------------------------


def scanned_names(run: EvalRun) -> list[str]:
    """The scanners that have looked at the run, in the registry's order."""
    seen = {name for scan in run.scans.only("scanners") for name in scan.scanners}
    return [name for name in SCANNERS if name in seen]


def scan_counts(run: EvalRun) -> dict:
    """{"scanned": [names], "findings": {scanner: n}, "rollouts": {scanner: rollouts flagged}, "by_model":
    {model: {scanner: n}}}; a scanner that looked and found nothing counts 0."""
    scanned = scanned_names(run)
    findings = {name: 0 for name in scanned}
    flagged = {name: 0 for name in scanned}
    by_model: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(scanned, 0))
    rows = (
        ScanFinding.objects.filter(run=run)
        .values("scanner", "rollout__endpoint__name")
        .annotate(n=Count("id"), rollouts=Count("rollout", distinct=True))
    )
    for row in rows:
        name = row["scanner"]
        findings[name] = findings.get(name, 0) + row["n"]
        flagged[name] = flagged.get(name, 0) + row["rollouts"]
        by_model[row["rollout__endpoint__name"]][name] = (
            by_model[row["rollout__endpoint__name"]].get(name, 0) + row["n"]
        )
    if not by_model and scanned:
        by_model[run.endpoint.name] = dict.fromkeys(scanned, 0)
    return {"scanned": scanned, "findings": findings, "rollouts": flagged, "by_model": dict(by_model)}


def run_findings(run: EvalRun, scanner: str | None = None):
    """The run's findings (one scanner's, when named), with what a list shows of their rollouts."""
    rows = ScanFinding.objects.filter(run=run).select_related("rollout__revision__task", "rollout__endpoint")
    if scanner:
        rows = rows.filter(scanner=scanner)
    return rows.order_by("rollout__revision__task__external_id", "rollout__repeat_index", "rollout_id", "scanner", "id")


def finding_dict(finding: ScanFinding) -> dict:
    return {
        **finding.as_dict(),
        "task": finding.rollout.revision.task.external_id,
        "repeat": finding.rollout.repeat_index,
        "model": finding.rollout.endpoint.name,
    }


def scan_json(run: EvalRun) -> dict:
    """The `scan_run --json` shape (also the run export's "scan")."""
    latest = run.scans.first()
    counts = scan_counts(run)
    return {
        "run": run.pk,
        "scanned": counts["scanned"],
        "counts": counts["findings"],
        "rollouts_flagged": counts["rollouts"],
        "by_model": counts["by_model"],
        "findings": [finding_dict(f) for f in run_findings(run)],
        "errors": latest.errors if latest else [],
        "scanned_at": latest.created_at.isoformat() if latest else None,
    }


def compare_findings(a: EvalRun, b: EvalRun) -> list[dict]:
    """Which behaviours differ between two runs: per scanner either looked at, the findings and the flagged rollouts
    of each ({"scanner", "a", "b", "difference", "a_rollouts", "b_rollouts"}), those that differ most first."""
    names = [name for name in SCANNERS if name in set(scanned_names(a)) | set(scanned_names(b))]
    flagged = {}
    for side, run in (("a", a), ("b", b)):
        per: dict[str, list] = defaultdict(list)
        counts: Counter = Counter()
        for finding in run_findings(run):
            counts[finding.scanner] += 1
            if finding.rollout_id not in {r["rollout"] for r in per[finding.scanner]}:
                per[finding.scanner].append(
                    {"rollout": finding.rollout_id, "task": finding.rollout.revision.task.external_id}
                )
        flagged[side] = (counts, per)
    rows = []
    for name in names:
        count_a, count_b = flagged["a"][0][name], flagged["b"][0][name]
        rows.append(
            {
                "scanner": name,
                "title": SCANNERS[name].title,
                "a": count_a,
                "b": count_b,
                "difference": count_a - count_b,
                "a_rollouts": flagged["a"][1][name],
                "b_rollouts": flagged["b"][1][name],
            }
        )
    rows.sort(key=lambda r: (-abs(r["difference"]), list(SCANNERS).index(r["scanner"])))
    return rows
