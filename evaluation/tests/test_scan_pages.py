"""Transcript scans of stored runs: queued when a run finishes, run by `scan_run` (its JSON contract), the LLM-judged
scanner through a scripted judge on loopback, and what the run page, the compare page, the API and the export show.

The world is the evaluation pages' three dressed runs (evaluation.testing): every rollout that did not score 1
says "Done with …" while its `summary_right` check failed, so false_success flags exactly those.
"""

import json
import re
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from evaluation.job_kinds import SCAN_JOB
from evaluation.models import Rollout, RunScan, ScanFinding
from evaluation.scanners import DEFAULT_SCANNERS
from evaluation.services.scans import scan_json, scan_run
from evaluation.testing import build_world, text, url
from jobs.models import JobRun
from llm.models import ModelCall, ModelEndpoint
from llm.testing import Reply

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db):
    return build_world()


def unpaid(run) -> set[int]:
    """The rollouts of the run that scored but not in full: each claimed "Done" while summary_right failed."""
    return set(run.rollouts.filter(status=Rollout.Status.SCORED, score__lt=1.0).values_list("pk", flat=True))


def scan_command(*args) -> dict:
    out = StringIO()
    call_command("scan_run", *args, "--json", stdout=out, stderr=StringIO())
    return json.loads(out.getvalue().strip().splitlines()[-1])


def test_a_run_that_finishes_queues_its_rule_based_scan(world):
    queued = JobRun.objects.filter(kind=SCAN_JOB).order_by("pk")
    assert [job.params for job in queued] == [
        {"run_id": world[name].pk, "scanners": list(DEFAULT_SCANNERS)} for name in ("strong", "weak", "flaky")
    ]


def test_scan_run_prints_the_counts_per_scanner_and_each_finding(world):
    strong = world["strong"]
    result = scan_command(str(strong.pk))

    assert result["run"] == strong.pk and result["scanned"] == list(DEFAULT_SCANNERS)
    flagged = unpaid(strong)
    assert len(flagged) == 3  # eval-b's second repeat, eval-d's two
    assert result["counts"] == dict.fromkeys(DEFAULT_SCANNERS, 0) | {"false_success": 3}
    assert result["rollouts_flagged"]["false_success"] == 3
    assert result["by_model"] == {"strong": dict.fromkeys(DEFAULT_SCANNERS, 0) | {"false_success": 3}}
    assert {f["rollout"] for f in result["findings"]} == flagged
    finding = result["findings"][0]
    assert set(finding) == {
        "rollout",
        "task",
        "repeat",
        "model",
        "scanner",
        "summary",
        "step",
        "model_call",
        "tool",
        "path",
        "evidence",
    }
    assert finding["scanner"] == "false_success" and finding["step"] == 3 and "summary_right" in finding["summary"]
    assert result["errors"] == [] and result["scanned_at"]

    # Again: the findings are replaced, not added to; the text form says the same.
    out = StringIO()
    call_command("scan_run", str(strong.pk), stdout=out, stderr=StringIO())
    assert "false_success: 3 finding(s) in 3 rollout(s)" in out.getvalue()
    assert ScanFinding.objects.filter(run=strong).count() == 3 and RunScan.objects.filter(run=strong).count() == 2


def test_scan_run_refuses_what_is_not_there(world):
    for args, message in [
        (["999999"], "no evaluation run #999999"),
        ([str(world["strong"].pk), "--scanner", "loops"], "unknown scanner 'loops'; known: reward_access"),
        ([str(world["strong"].pk), "--scanner", "judge", "--judge", "nobody"], "no model endpoint named 'nobody'"),
    ]:
        with pytest.raises(CommandError, match=message) as refused:
            call_command("scan_run", *args, stdout=StringIO(), stderr=StringIO())
        assert refused.value.returncode == 2
    assert not ScanFinding.objects.exists()


def test_the_judge_scanner_asks_the_judge_endpoint_once_a_rollout_and_its_calls_are_recorded(world, scripted_upstream):
    strong = world["strong"]
    ModelEndpoint.objects.create(
        name="judge", base_url=scripted_upstream.base_url, model="judge-model", roles=["judge"], max_retries=0
    )
    eval_d = "(task eval-d)"

    def judge(body):
        prompt = body["messages"][-1]["content"]
        found = [{"step": 1, "behaviour": "wrote a count it never computed", "evidence": "write"}]
        return Reply.text(json.dumps({"findings": found if eval_d in prompt else []}))

    scripted_upstream.responder = judge
    result = scan_command(str(strong.pk), "--scanner", "judge")

    scanned = strong.rollouts.filter(status=Rollout.Status.SCORED)
    assert result["scanned"] == ["judge"] and result["counts"] == {"judge": 2}
    judged = {f["rollout"] for f in result["findings"]}
    assert judged == set(scanned.filter(revision__task__external_id="eval-d").values_list("pk", flat=True))
    finding = result["findings"][0]
    assert (
        finding["step"] == 1 and finding["tool"] == "write" and "(judged by judge, model call #" in finding["evidence"]
    )
    calls = ModelCall.objects.filter(purpose="scan")
    assert sorted(calls.values_list("subject", flat=True)) == sorted(f"rollout:{r.pk}" for r in scanned)
    # The rule-based scan that follows keeps the judge's findings: each scanner's are replaced only by its own.
    scan_run(strong, user=None)
    assert ScanFinding.objects.filter(run=strong, scanner="judge").count() == 2


def test_a_judge_that_fails_is_reported_and_the_command_fails(world, scripted_upstream):
    ModelEndpoint.objects.create(
        name="judge", base_url=scripted_upstream.base_url, model="judge-model", roles=["judge"], max_retries=0
    )
    scripted_upstream.default = Reply.error(500, "judge down")
    with pytest.raises(CommandError, match=r"scan\(s\) could not be done: judge on rollout #") as failed:
        call_command("scan_run", str(world["weak"].pk), "--scanner", "all", stdout=StringIO(), stderr=StringIO())
    assert failed.value.returncode == 1
    scan = RunScan.objects.get(run=world["weak"])
    assert {e["scanner"] for e in scan.errors} == {"judge"} and "judge down" in scan.errors[0]["error"]
    assert ScanFinding.objects.filter(run=world["weak"], scanner="false_success").exists()


def test_without_a_judge_endpoint_the_scan_says_so_and_scans_the_rest(world):
    scan = scan_run(world["weak"], user=None, scanners=["judge", "false_success"])
    assert scan.scanners == ["false_success"]
    assert scan.errors == [
        {
            "rollout": None,
            "scanner": "judge",
            "error": "no enabled model endpoint serves the role 'judge': add one (manage.py endpoints add … --role "
            "judge) or pass the endpoint to use",
        }
    ]


# --- pages ---------------------------------------------------------------------------------------------------------


def test_the_run_page_loads_the_findings_with_counts_per_scanner_and_model_and_filters_by_scanner(world, viewer_client):
    strong = world["strong"]
    detail = text(viewer_client.get(url("detail", strong.pk)))
    assert f'hx-get="{url("findings", strong.pk)}" hx-trigger="load"' in detail

    before = text(viewer_client.get(url("findings", strong.pk), HTTP_HX_REQUEST="true"))
    assert "No scan of this run yet." in before and 'id="scan-form"' not in before  # a viewer may not scan

    scan_run(strong, user=None)
    page = text(viewer_client.get(url("findings", strong.pk), HTTP_HX_REQUEST="true"))
    assert page.startswith('<div id="scan-findings"') and "<html" not in page
    counts = page.split('id="scan-counts"')[1].split("</table>")[0]
    assert '<th class="num" title="findings in this model\'s rollouts">strong</th>' in counts
    row = counts.split('data-scanner="false_success"')[1].split("</tr>")[0]
    assert [re.sub(r"<[^>]+>", "", cell).strip() for cell in row.split("</td>")[1:4]] == ["3", "3", "3"]
    assert page.count('<tr data-rollout="') == 3

    samples = viewer_client.get(url("samples", strong.pk, finding="false_success"))
    assert samples.content.decode().count('<tr data-sample="') == 3
    assert f'href="{url("samples", strong.pk)}?finding=false_success"' in page

    filtered = text(viewer_client.get(url("findings", strong.pk, scanner="loop")))
    assert "<html" in filtered and "No finding of loop." in filtered
    assert viewer_client.get(url("findings", strong.pk, scanner="nope")).status_code == 400


def test_an_admin_asks_for_a_scan_and_a_viewer_cannot(world, admin_client, viewer_client):
    strong = world["strong"]
    assert 'id="scan-form"' in text(admin_client.get(url("findings", strong.pk)))
    assert viewer_client.post(url("scan", strong.pk), {"scanner": ["loop"]}).status_code == 403

    response = admin_client.post(url("scan", strong.pk), {"scanner": ["loop", "refusal"]})
    job = JobRun.objects.filter(kind=SCAN_JOB).order_by("-pk").first()
    assert job.params == {"run_id": strong.pk, "scanners": ["loop", "refusal"]}
    assert response.url == url("findings", strong.pk, job=job.pk)
    live = text(admin_client.get(response.url))
    assert 'id="scan-job"' in live and 'hx-trigger="every 2s"' in live

    refused = admin_client.post(url("scan", strong.pk), {"scanner": ["loops"]}, follow=True)
    assert "The scan was not started: unknown scanner &#x27;loops&#x27;" in text(refused)


def test_the_compare_page_shows_which_behaviours_differ(world, viewer_client):
    strong, weak = world["strong"], world["weak"]
    compare = text(viewer_client.get(url("compare", a=strong.pk, b=weak.pk)))
    assert f'hx-get="{url("compare-findings")}?a={strong.pk}&amp;b={weak.pk}"' in compare
    assert "Neither run has been scanned yet." in text(
        viewer_client.get(url("compare-findings", a=strong.pk, b=weak.pk), HTTP_HX_REQUEST="true")
    )
    scan_run(strong, user=None)
    scan_run(weak, user=None)
    body = text(viewer_client.get(url("compare-findings", a=strong.pk, b=weak.pk)))
    table = body.split('id="behaviours-table"')[1].split("</table>")[0]
    first = table.split("<tbody>")[1].split("</tr>")[0]
    weak_flagged = len(unpaid(weak))
    assert 'data-scanner="false_success"' in first and f'<td class="num">{3 - weak_flagged}</td>' in first
    assert first.count('class="mono"') == 3 + weak_flagged  # the flagged rollouts of A and B, linked
    assert viewer_client.get(url("compare-findings", a=strong.pk)).status_code == 400


# --- API and export ------------------------------------------------------------------------------------------------


def test_the_api_gives_counts_and_findings_and_lets_admins_scan(world, api_as, admin_user, viewer):
    strong = world["strong"]
    scan_run(strong, user=None)
    viewer_api, admin_api = api_as(viewer), api_as(admin_user)

    counts = viewer_api.get(f"/api/eval-runs/{strong.pk}/scan/").json()
    assert counts == {k: v for k, v in scan_json(strong).items() if k != "findings"}
    assert counts["counts"]["false_success"] == 3
    assert viewer_api.get(f"/api/eval-runs/{strong.pk}/scan/?x=1").status_code == 400

    findings = viewer_api.get(f"/api/eval-runs/{strong.pk}/findings/?scanner=false_success").json()
    assert findings["count"] == 3 and findings["results"][0]["scanner"] == "false_success"
    assert viewer_api.get(f"/api/eval-runs/{strong.pk}/findings/?scanner=loop").json()["count"] == 0
    assert viewer_api.get(f"/api/eval-runs/{strong.pk}/findings/?scanner=nope").status_code == 400
    flagged = viewer_api.get(f"/api/eval-runs/{strong.pk}/rollouts/?finding=false_success").json()
    assert {r["id"] for r in flagged["results"]} == unpaid(strong)
    assert viewer_api.get(f"/api/eval-runs/{strong.pk}/rollouts/?finding=nope").status_code == 400

    assert viewer_api.post(f"/api/eval-runs/{strong.pk}/scan/", {}, format="json").status_code == 403
    started = admin_api.post(f"/api/eval-runs/{strong.pk}/scan/", {"scanners": ["all"]}, format="json")
    assert started.status_code == 202 and started.json()["kind"] == SCAN_JOB
    assert JobRun.objects.get(pk=started.json()["id"]).params["scanners"][-1] == "judge"
    bad = admin_api.post(f"/api/eval-runs/{strong.pk}/scan/", {"scanners": ["nope"]}, format="json")
    assert bad.status_code == 400 and "scanners" in bad.json()
    no_judge = admin_api.post(f"/api/eval-runs/{strong.pk}/scan/", {"judge": "nobody"}, format="json")
    assert no_judge.status_code == 400 and no_judge.json()["detail"] == "no model endpoint named 'nobody'"


def test_the_run_export_holds_the_scan(world, viewer_client):
    strong = world["strong"]
    scan_run(strong, user=None)
    exported = json.loads(b"".join(viewer_client.get(url("export-json", strong.pk)).streaming_content))
    assert exported["scan"]["counts"]["false_success"] == 3
    assert {f["rollout"] for f in exported["scan"]["findings"]} == unpaid(strong)
