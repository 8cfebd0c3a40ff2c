"""The transcript findings in a real browser: an admin opens a finished run, asks its card for a scan with the LLM judge,
and the findings page follows the scan job on a real django-q worker to its end without a reload; a click on the
judge's row then lists only the rollouts it flagged.

The judge is the scripted server on loopback, taking a second an answer (Reply.delay), so that the page is open while
the job runs; it flags the rollouts of eval-d. The runs are the evaluation pages' dressed world (helpers.build_world).
"""

import json

import pytest

from evaluation.models import Rollout
from evaluation.testing import build_world, url
from lib.browser_testing import assert_no_reload, log_in, mark_document, screenshot, watch
from llm.models import ModelEndpoint
from llm.testing import Reply

pytestmark = [pytest.mark.browser, pytest.mark.workers, pytest.mark.django_db(transaction=True)]

SCAN_TIMEOUT = 120_000  # ms: the job runs on a worker of a loaded machine; a bound, not a timing


def test_an_admin_scans_a_run_with_the_judge_and_the_page_follows_the_job(
    page, live_server, admin_user, django_q_worker, scripted_upstream
):
    def judge(body):
        flagged = "(task eval-d)" in body["messages"][-1]["content"]
        found = [{"step": 1, "behaviour": "wrote a count it never computed", "evidence": "write"}] if flagged else []
        return Reply.text(json.dumps({"findings": found}), delay=1.0)

    scripted_upstream.responder = judge
    ModelEndpoint.objects.create(
        name="judge", base_url=scripted_upstream.base_url, model="judge-model", roles=["judge"], max_retries=0
    )
    strong = build_world()["strong"]
    eval_d = set(strong.rollouts.filter(revision__task__external_id="eval-d", status=Rollout.Status.SCORED))

    seen = watch(page)
    log_in(page, live_server, admin_user)
    page.goto(f"{live_server.url}{url('detail', strong.pk)}")
    page.locator("#scan #scan-form").wait_for()  # the card came in through htmx
    page.check("#scan-form input[value=judge]")
    page.click("#scan-form button[type=submit]")
    page.wait_for_url("**/findings/?job=*")
    mark_document(page)
    page.locator("#scan-job").wait_for()  # the judge takes a second a rollout: the job is still going

    judge_row = page.locator('#scan-counts tr[data-scanner="judge"]')
    judge_row.wait_for(timeout=SCAN_TIMEOUT)
    assert page.locator("#scan-job").count() == 0
    assert judge_row.locator("td.num").all_inner_texts()[:2] == ["2", "2"]
    assert_no_reload(page)

    screenshot(page, "scan-findings")
    judge_row.locator("a[hx-get]").click()  # the scanner's name (its count links to the samples page)
    page.locator("#findings-heading", has_text="Rollouts flagged by judge").wait_for()
    rows = page.locator('#findings-table tr[data-scanner="judge"]')
    assert {int(r) for r in rows.evaluate_all("rows => rows.map(r => r.dataset.rollout)")} == {r.pk for r in eval_d}
    assert page.locator("#findings-table tbody tr").count() == 2
    assert_no_reload(page)
    assert not seen.console_errors and not seen.failed_responses, (seen.console_errors, seen.failed_responses)
