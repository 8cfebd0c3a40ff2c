"""The demo models' endpoints: registered at the address the demo server listens on, disabled when it stops.

    endpoints = register_demo_endpoints("http://127.0.0.1:40123/v1")    # made, or updated and enabled
    disable_demo_endpoints(base_url="http://127.0.0.1:40123/v1")        # those still at that address

Their names start with "demo-" and their model ids with llm.models.DEMO_MODEL_PREFIX, so every page that names them
says they are demo models. Each goes through llm.services, as an endpoint added on the Models page does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model

from accounts.roles import ADMIN, REVIEWER, grant_role, has_role
from benchmarks.models import Benchmark, BenchmarkVersion
from benchmarks.services import get_or_create_benchmark
from llm.models import ModelEndpoint
from llm.services import create_endpoint, update_endpoint
from review.models import BenchmarkCandidate, ReviewDecision
from review.services import ReviewError, decide, freeze_version, propose_candidates
from review.team import set_team
from tasks.importing import import_path
from tasks.models import SanityReport, Task
from tasks.sanity import check_here

from .agent import GOOD, WEAK
from .server import GENERATOR, JUDGE, KEY_ENV

Role = ModelEndpoint.Role
DEMO_ENDPOINTS = {  # name -> (model id, roles)
    "demo-agent-good": (GOOD.model, [Role.AGENT]),
    "demo-agent-weak": (WEAK.model, [Role.AGENT]),
    "demo-judge": (JUDGE, [Role.DIAGNOSIS, Role.JUDGE]),
    "demo-generator": (GENERATOR, [Role.GENERATOR]),
}


def register_demo_endpoints(base_url: str, *, user=None) -> list[ModelEndpoint]:
    """Every demo endpoint at `base_url`, enabled, free (no price) and keyed by the demo server's served key."""
    endpoints = []
    for name, (model, roles) in DEMO_ENDPOINTS.items():
        fields = {
            "base_url": base_url,
            "model": model,
            "api_style": ModelEndpoint.ApiStyle.CHAT,
            "api_key_env": KEY_ENV,
            "served_at": base_url,  # the demo server's key goes to this address only
            "served_key_env": KEY_ENV,
            "roles": [str(role) for role in roles],
            "timeout_seconds": 60.0,
            "max_retries": 1,
            "max_concurrent": 8,
            "sampling": {},
            "price_input_per_mtok": Decimal(0),
            "price_output_per_mtok": Decimal(0),
            "enabled": True,
        }
        existing = ModelEndpoint.objects.filter(name=name).first()
        if existing is None:
            endpoints.append(create_endpoint(name, user=user, **fields))
        else:
            endpoints.append(update_endpoint(existing, user=user, **fields))
    return endpoints


def disable_demo_endpoints(*, base_url: str | None = None, user=None) -> list[ModelEndpoint]:
    """Disable the enabled demo endpoints (only those at `base_url`, when given: another demo server may have
    registered them since). Returns those disabled."""
    found = ModelEndpoint.objects.filter(name__in=DEMO_ENDPOINTS, enabled=True)
    if base_url is not None:
        found = found.filter(base_url=base_url)
    return [update_endpoint(endpoint, user=user, enabled=False) for endpoint in found]


# --- the demo's benchmark and reviewers ---------------------------------------------------------------------------

EXAMPLES = Path(settings.BASE_DIR) / "examples" / "tasks"
DEMO_BENCHMARK = "demo"
# Fixed, printed logins: a demo's reviewers are for trying review as a team on one machine, never for a deployment.
DEMO_REVIEWERS = {"ann": "ann-reviews-demo", "ben": "ben-reviews-demo"}
# Every candidate gets a second, blind decision: in a demo's handful of reviews, agreement has items at once.
DEMO_OVERLAP = 1.0


class DemoSetupError(Exception):
    """The demo benchmark could not be made; the message says what to do."""


@dataclass
class DemoSetup:
    benchmark: Benchmark
    version: BenchmarkVersion
    version_created: bool
    sanity_checked: list[str]  # task ids checked now (the others had a report)
    accepted: list[str]  # task ids accepted now
    reviewers: list[dict]  # {"username", "password" (None once changed), "created"}

    def as_dict(self) -> dict:
        return {
            "benchmark": self.benchmark.name,
            "version": self.version.number,
            "version_created": self.version_created,
            "tasks": sorted(self.version.revisions.values_list("task__external_id", flat=True)),
            "sanity_checked": self.sanity_checked,
            "accepted": self.accepted,
            "reviewers": self.reviewers,
        }


def ensure_demo_reviewers() -> list[dict]:
    """The demo's reviewer accounts, made once with their fixed passwords; a password changed since is left alone
    (and not printed)."""
    User = get_user_model()
    accounts = []
    for username, password in DEMO_REVIEWERS.items():
        user = User.objects.filter(username=username).first()
        created = user is None
        if created:
            user = User.objects.create_user(username=username, password=password)
            grant_role(user, REVIEWER)
        accounts.append(
            {"username": username, "password": password if user.check_password(password) else None, "created": created}
        )
    return accounts


def setup_demo_benchmark(*, user, workers: int = 2) -> DemoSetup:
    """The demo benchmark of the example tasks, frozen, and its reviewers: every step once, so a rerun only does
    what is missing.

    The example tasks are imported (unchanged ones stay), their current revisions sanity-checked in the sandbox
    where no report exists, proposed to DEMO_BENCHMARK and accepted by the first demo reviewer through the accept
    gate (no override), and a version frozen by `user` (an admin) when the benchmark has none. Raises
    DemoSetupError when a step is refused."""
    if not has_role(user, ADMIN):
        raise DemoSetupError("setting up the demo benchmark needs an admin: run `manage.py ensure_admin` first")
    report = import_path(EXAMPLES, user=user)
    if report.failed:
        raise DemoSetupError(f"the example tasks did not import: {report.failed}")
    reviewers = ensure_demo_reviewers()
    team = list(get_user_model().objects.filter(username__in=DEMO_REVIEWERS).order_by("username"))
    tasks = list(Task.objects.filter(external_id__in=_example_ids()).select_related("current_revision"))
    unchecked = [t.current_revision for t in tasks if not SanityReport.latest_for(t.current_revision).exists()]
    for revision, _report, error in check_here(unchecked, workers=workers):
        if error:
            raise DemoSetupError(f"the sanity check of {revision.task.external_id} did not run: {error}")
    benchmark, _ = get_or_create_benchmark(
        DEMO_BENCHMARK, user=user, description="The six example tasks, one a category: the demo's frozen benchmark."
    )
    propose_candidates(benchmark, tasks, user=user)
    accepted = []
    open_ones = benchmark.candidates.filter(task__in=tasks).exclude(status=BenchmarkCandidate.Status.ACCEPTED)
    for candidate in open_ones.select_related("task"):
        # Each demo reviewer in turn until the candidate has the decisions the benchmark needs (one, until the
        # team below is set; then the overlap asks a second one of some).
        for reviewer in team:
            if candidate.decisions.filter(reviewer=reviewer).exists():
                continue
            try:
                decide(candidate, ReviewDecision.Decision.ACCEPT, user=reviewer, reason="Example task: checked.")
            except ReviewError as exc:
                raise DemoSetupError(f"{candidate.task.external_id} was not accepted: {exc}") from None
            candidate.refresh_from_db()
            if candidate.status == BenchmarkCandidate.Status.ACCEPTED:
                accepted.append(candidate.task.external_id)
                break
    # Review as a team: the demo reviewers, and the overlap (after the examples are in: they needed one decision).
    set_team(benchmark, user=user, reviewers=list(DEMO_REVIEWERS), decisions_needed=1, overlap_share=DEMO_OVERLAP)
    version = benchmark.versions.order_by("-number").first()
    created = version is None
    if created:
        version = freeze_version(benchmark, user=user, note="The example tasks, frozen by make demo.")
    return DemoSetup(
        benchmark=benchmark,
        version=version,
        version_created=created,
        sanity_checked=sorted(r.task.external_id for r in unchecked),
        accepted=sorted(accepted),
        reviewers=reviewers,
    )


def _example_ids() -> list[str]:
    ids = []
    for entry in sorted(EXAMPLES.iterdir()):
        if (entry / "data_entry.json").is_file():
            ids.append(json.loads((entry / "data_entry.json").read_text())["task_id"])
    return ids
