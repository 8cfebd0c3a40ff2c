"""`manage.py demo_models --setup` (what `make demo` runs before serving): the example tasks sanity-checked in the
sandbox, accepted through the gate into the frozen demo benchmark with their categories, and the demo reviewers
able to sign in; a rerun changes nothing."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from accounts.roles import ADMIN, REVIEWER, has_role
from accounts.testing import make_user
from benchmarks.models import Benchmark, BenchmarkVersion
from demo.services import DEMO_BENCHMARK, DEMO_OVERLAP, DEMO_REVIEWERS
from review.models import BenchmarkCandidate, PlantedFlaw, ReviewDecision
from review.planting import plant_flaws
from tasks.models import SanityReport

pytestmark = [pytest.mark.usefixtures("bwrap", "taxonomy")]


def setup_json(capsys) -> dict:
    call_command("demo_models", "--setup", "--json")
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_the_setup_freezes_the_example_tasks_and_makes_two_reviewers(capsys):
    admin = make_user("admin", ADMIN)
    first = setup_json(capsys)

    assert (first["benchmark"], first["version"], first["version_created"]) == (DEMO_BENCHMARK, 1, True)
    assert len(first["tasks"]) == 6 and first["accepted"] == first["tasks"] == first["sanity_checked"]
    assert [(r["username"], r["password"]) for r in first["reviewers"]] == list(DEMO_REVIEWERS.items())

    [version] = BenchmarkVersion.objects.filter(benchmark__name=DEMO_BENCHMARK)
    revisions = list(version.revisions.select_related("task__benchmark_category"))
    # One task a category: the dashboard's per-category scores have six columns to show.
    assert len({r.task.benchmark_category.slug for r in revisions}) == 6
    for revision in revisions:
        report = SanityReport.latest_for(revision).get()
        assert (report.crashed, report.lazy_score, report.solvable) == (False, 0.0, True), revision.task.external_id
    decisions = ReviewDecision.objects.filter(candidate__benchmark__name=DEMO_BENCHMARK)
    assert {(d.decision, d.reviewer.username, d.override_reason) for d in decisions} == {("accept", "ann", "")}
    benchmark = Benchmark.objects.get(name=DEMO_BENCHMARK)
    assert sorted(benchmark.reviewers.values_list("username", flat=True)) == sorted(DEMO_REVIEWERS)
    assert (benchmark.decisions_needed, benchmark.overlap_share) == (1, DEMO_OVERLAP)
    # Its accepted examples are what planted flaws are copies of: every kind finds one to carry it.
    plants = plant_flaws(benchmark, PlantedFlaw.Kind.values, len(PlantedFlaw.Kind.values), user=admin, seed=1)
    assert sorted(p.kind for p in plants) == sorted(PlantedFlaw.Kind.values)

    for username, password in DEMO_REVIEWERS.items():
        client = Client()
        signed_in = client.post("/login/", {"username": username, "password": password})
        assert signed_in.status_code == 302, signed_in.content[:300]
        assert client.get("/review/").status_code == 200
        assert has_role(get_user_model().objects.get(username=username), REVIEWER)

    again = setup_json(capsys)
    assert (again["version"], again["version_created"], again["accepted"], again["sanity_checked"]) == (
        1,
        False,
        [],
        [],
    )
    assert [r["created"] for r in again["reviewers"]] == [False, False]
    assert BenchmarkVersion.objects.count() == 1 and Benchmark.objects.count() == 1
    accepted = BenchmarkCandidate.objects.filter(status="accepted", plant__isnull=True)
    assert accepted.count() == 6 and decisions.count() == 6


def test_the_setup_prints_the_reviewer_logins_and_needs_an_admin(capsys):
    with pytest.raises(CommandError, match="needs an admin"):
        call_command("demo_models", "--setup")
    make_user("admin", ADMIN)
    call_command("demo_models", "--setup")
    out = capsys.readouterr().out
    assert f"Demo benchmark {DEMO_BENCHMARK} v1: 6 tasks (frozen now)" in out
    for username, password in DEMO_REVIEWERS.items():
        assert f"Demo reviewer login: {username} / {password}" in out
