"""manage.py plant_flaws: the plants as JSON last, and its refusals (exit status 2, nothing planted)."""

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.testing import make_user
from review.models import PlantedFlaw
from review.tests.helpers import accept_all
from review.tests.test_planting import rich_task

pytestmark = pytest.mark.django_db


def test_the_command_plants_and_prints_the_plants_last(benchmark, admin_user, reviewer, capsys):
    accept_all(benchmark, [rich_task()], admin_user=admin_user, reviewer=reviewer)
    call_command(
        "plant_flaws",
        "--benchmark",
        benchmark.name,
        "--kinds",
        "input_removed,rubric_contradicts",
        "--count",
        "3",
        "--seed",
        "2",
        "--by",
        admin_user.username,
        "--no-diagnose",
        "--json",
    )
    out = capsys.readouterr().out.strip().splitlines()
    body = json.loads(out[-1])
    assert body["benchmark"] == benchmark.name
    assert [p["kind"] for p in body["plants"]] == ["input_removed", "rubric_contradicts", "input_removed"]
    assert set(body["plants"][0]) == {
        "id",
        "candidate",
        "task",
        "kind",
        "component",
        "path",
        "change",
        "source_task",
        "source_revision",
    }
    assert body["plants"][0]["source_task"] == "sales-summary" and body["plants"][0]["source_revision"] == 1
    assert PlantedFlaw.objects.count() == 3
    assert out[0].startswith(f"input_removed: {body['plants'][0]['task']} (copy of sales-summary): ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--benchmark", "nope", "--kinds", "input_removed"], "no benchmark 'nope'"),
        (["--kinds", "typo"], "unknown flaw kind 'typo'"),
        (["--kinds", "input_removed", "--count", "0"], "between 1 and 50"),
        (["--kinds", "input_removed"], "no accepted candidate"),
        (["--kinds", "input_removed", "--by", "rita"], "no admin 'rita'"),
    ],
)
def test_refusals_exit_2_and_plant_nothing(benchmark, admin_user, args, message):
    make_user("rita", "reviewer")
    full = ["--benchmark", benchmark.name, "--by", admin_user.username, *args]
    with pytest.raises(CommandError, match=message) as refused:
        call_command("plant_flaws", *full)
    assert refused.value.returncode == 2
    assert not PlantedFlaw.objects.exists()
