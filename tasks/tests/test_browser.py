"""The catalog pages in a real browser: Debian's chromium driven by Playwright against a live server.

Screenshots go to $CLAWGYM_SCREENSHOT_DIR (default /tmp/clawgym-screens) for a look by eye.
"""

import json
import zipfile
from pathlib import Path

import pytest
from django.urls import reverse

from jobs.models import JobRun
from lib.browser_testing import assert_no_reload, log_in, mark_document, screenshot, watch
from sandbox.testing import require_bwrap
from tasks.models import ScenarioCategory, Task
from tasks.package import STANDARD_REWARD_SH, PackageFile, TaskPackage
from tasks.services import revise_task, save_package
from tasks.testing import SAMPLE_FILES, make_task
from tasks.views import PAGE_SIZE

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("taxonomy")]


def test_log_in_and_dashboard_counts(page, live_server, viewer):
    make_task("alpha-report", metadata={"category": "analysis-reasoning"})
    make_task("beta-report", metadata={"category": "analysis-reasoning"}, status=Task.Status.DRAFT)
    make_task("gamma-build", metadata={"category": "software-development"})
    log_in(page, live_server, viewer)
    assert page.inner_text("[data-testid=total-tasks]") == "3"
    table = page.locator("#category-table")
    row = table.locator("tr", has_text="Analysis & Reasoning")
    assert row.locator("td").last.inner_text() == "2"
    assert "vic_viewer · viewer" in page.inner_text(".who")
    screenshot(page, "dashboard")
    row.locator("a", has_text="1").first.click()  # a count links to the filtered list
    page.wait_for_url("**/tasks/?category=analysis-reasoning&status=*")
    assert page.locator(".task-table tbody tr").count() == 1


def test_task_list_search_filter_and_paginate_with_htmx(page, live_server, viewer):
    for i in range(PAGE_SIZE + 5):
        make_task(f"bulk-{i:03d}", files=[])
    make_task("needle-task", instruction="Find the haystack needle", status=Task.Status.DRAFT, files=[])
    problems = watch(page)
    log_in(page, live_server, viewer)
    page.goto(f"{live_server.url}{reverse('tasks:list')}")
    assert page.inner_text("[data-testid=result-count]").startswith(f"{PAGE_SIZE + 6} tasks")
    screenshot(page, "task-list")
    mark_document(page)

    page.locator("input[name=q]").press_sequentially("haystack", delay=20)
    page.wait_for_function("document.querySelectorAll('.task-table tbody tr').length === 1")
    assert page.locator(".task-table tbody tr td").first.inner_text() == "needle-task"
    assert "q=haystack" in page.url  # the URL follows the filters (bookmarkable, back button)
    assert_no_reload(page)

    page.fill("input[name=q]", "")
    page.wait_for_function(f"document.querySelectorAll('.task-table tbody tr').length === {PAGE_SIZE}")
    page.select_option("select[name=status]", "draft")
    page.wait_for_function("document.querySelectorAll('.task-table tbody tr').length === 1")
    assert "status=draft" in page.url
    page.select_option("select[name=status]", "")
    page.wait_for_function(f"document.querySelectorAll('.task-table tbody tr').length === {PAGE_SIZE}")

    page.click(".pagination a[rel=next]")
    page.wait_for_function("document.querySelectorAll('.task-table tbody tr').length === 6")
    assert "page=2" in page.url
    assert "page 2 of 2" in page.inner_text("[data-testid=result-count]")
    assert_no_reload(page)
    # htmx reports a trigger it cannot parse on the console (and then ignores part of it).
    assert problems.console_errors == [] and problems.failed_responses == []


def test_every_page_links_a_favicon_that_exists(page, live_server, viewer):
    problems = watch(page)
    log_in(page, live_server, viewer)
    for url in (reverse("dashboard"), reverse("tasks:list"), reverse("jobs:list")):
        page.goto(f"{live_server.url}{url}")
        icon = page.locator("link[rel=icon]")
        assert icon.count() == 1, url
        response = page.request.get(page.evaluate("document.querySelector('link[rel=icon]').href"))
        assert response.status == 200 and response.headers["content-type"].startswith("image/"), url
    assert problems.failed_responses == []


# Credits only the right count: the scaffold (an empty count.txt) earns nothing.
COUNT_CHECK = """import json
try:
    count = open("count.txt").read().strip()
except OSError:
    count = None
print(json.dumps({"count_right": count == "3"}))
"""


@pytest.mark.workers
def test_a_reviewer_runs_a_sanity_check_and_sees_its_progress_then_its_report_without_reload(
    page, live_server, reviewer, django_q_worker
):
    require_bwrap()
    package = TaskPackage(
        external_id="count-orders",
        instruction="Count the orders in `orders.csv` and write the number, alone, to count.txt.",
        metadata={"category": "analysis-reasoning"},
        files=[
            PackageFile("orders.csv", b"id,item\n1,apples\n2,pears\n3,plums\n"),
            PackageFile("reward.sh", STANDARD_REWARD_SH.encode(), "reward"),
            PackageFile("check.py", COUNT_CHECK.encode(), "reward"),
            PackageFile("count.txt", b"3\n", "solution"),
        ],
    )
    save_package(package)
    log_in(page, live_server, reviewer)
    problems = watch(page)
    page.goto(f"{live_server.url}{reverse('tasks:detail', args=['count-orders'])}")
    assert page.locator("[data-testid=sanity-missing]").is_visible()
    # The rollout form is fetched in from the rollouts app (a reviewer may start one; no benchmark form: not an admin).
    page.wait_for_selector("#task-actions [data-testid=start-rollout] select[name=harness]")
    assert page.locator("#task-actions [data-testid=propose-task]").count() == 0
    mark_document(page)

    page.click("#sanity button:text('Run sanity check')")
    # The job's progress appears in the card at once (queued or running), then the report replaces it.
    page.wait_for_selector("#sanity-job .job-progress")
    run = JobRun.objects.get(kind="tasks.sanity_check")
    assert page.locator(f"#job-progress-{run.pk}").count() == 1
    page.wait_for_selector("[data-testid=sanity-verdict]", timeout=90_000)
    assert page.inner_text("[data-testid=sanity-verdict]") == "Passed"
    assert page.locator("[data-testid=sanity-missing]").count() == 0
    assert page.locator("#sanity-job .job-progress").count() == 0  # the finished job is no longer shown as running
    assert_no_reload(page)
    assert problems.console_errors == [] and problems.failed_responses == []
    screenshot(page, "task-sanity-finished")


def test_task_detail_file_viewer_and_revision_diff(page, live_server, viewer, admin_user):
    task = make_task("sales-report", files=SAMPLE_FILES, stage="import", message="first import")
    revise_task(
        task,
        user=admin_user,
        message="south total corrected",
        instruction="Summarise the sales **by region**.\n\n<script>document.title='pwned'</script>",
        file_changes={("input", "data/sales.csv"): b"region,total\nnorth,10\nsouth,25\n"},
    )
    log_in(page, live_server, viewer)
    page.goto(f"{live_server.url}{reverse('tasks:list')}")
    page.click("text=sales-report")
    page.wait_for_url("**/tasks/sales-report/")
    assert page.title() != "pwned"  # the script in the instruction is shown as text, never run
    assert "<script>document.title='pwned'</script>" in page.inner_text("#instruction")
    # As the agent gets it: the stars are the instruction's text, not Markdown's emphasis.
    assert "Summarise the sales **by region**." in page.inner_text("#instruction .instruction-text")
    assert page.locator("#instruction strong").count() == 0
    mark_document(page)

    page.click("#files a:text('data/sales.csv')")
    page.wait_for_selector("#file-viewer table.csv")
    cells = page.locator("#file-viewer table.csv tbody tr").nth(1).locator("td").all_inner_texts()
    assert cells == ["2", "south", "25"]
    page.click("#files a:text('README.md')")
    page.wait_for_selector("#file-viewer .markdown h1")
    assert page.inner_text("#file-viewer .markdown h1") == "Notes"
    page.click("#files a:text('logo.png')")
    page.wait_for_selector("#file-viewer .binary-note")
    assert_no_reload(page)
    page.click("#files a:text('data/sales.csv')")
    page.wait_for_selector("#file-viewer table.csv")
    assert page.locator("#files a[aria-current]").inner_text() == "data/sales.csv"  # the file on show is marked
    screenshot(page, "task-detail")

    page.select_option("select[name=a]", "1")
    page.select_option("select[name=b]", "2")
    page.click("#history button[type=submit]")
    page.wait_for_url("**/tasks/sales-report/diff/?a=1&b=2")
    assert page.locator("#instruction-diff .d-add").first.inner_text() == "+Summarise the sales **by region**."
    csv_diff = page.locator(".file-change", has_text="data/sales.csv")
    assert csv_diff.locator(".d-del").inner_text() == "-south,20"
    assert csv_diff.locator(".d-add").inner_text() == "+south,25"
    screenshot(page, "diff")

    page.click("a:text('r1')")
    page.wait_for_url("**/tasks/sales-report/?rev=1")
    assert "View the current revision" in page.inner_text(".notice")
    screenshot(page, "old-revision")


def _task_folder_zip(tmp_path: Path, task_id: str = "uploaded-budget", *, broken: bool = False) -> Path:
    """A zip of one ClawGym task folder; `broken`: its data_entry.json has no user_query, so the task fails."""
    folder = tmp_path / task_id
    (folder / "input_files").mkdir(parents=True)
    (folder / "reward").mkdir()
    entry = {
        "task_id": task_id,
        "user_query": "Total the budget in budget.csv and write total.txt.",
        "metadata": {"category": "analysis-reasoning", "grading_type": "automated"},
    }
    if broken:
        del entry["user_query"]
    (folder / "data_entry.json").write_text(json.dumps(entry))
    (folder / "input_files" / "budget.csv").write_text("item,cost\nrent,900\nfood,300\n")
    (folder / "reward" / "check.py").write_text("import json\nprint(json.dumps({'total': 1.0}))\n")
    (folder / "reward" / "reward.sh").write_text('#!/usr/bin/env bash\npython3 "$(dirname "$0")/check.py"\n')
    archive = tmp_path / f"{task_id}.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(folder.rglob("*")):
            zf.write(path, path.relative_to(tmp_path).as_posix())
    return archive


@pytest.mark.workers
def test_admin_uploads_task_zips_and_watches_each_import_end_with_its_report(
    page, live_server, admin_user, django_q_worker, tmp_path
):
    log_in(page, live_server, admin_user)
    page.click("nav.mainnav a:text('Import')")
    page.wait_for_url("**/tasks/import/")
    screenshot(page, "import-empty")
    mark_document(page)
    page.set_input_files("input[name=archive]", str(_task_folder_zip(tmp_path)))
    page.select_option("select[name=format]", "clawgym")
    page.click("#import-panel button[type=submit]")
    page.wait_for_selector("#started-job")
    assert_no_reload(page)
    # The finished job shows its counts under its progress, and the recent imports refresh to list it.
    page.wait_for_selector("#started-job [data-testid=import-report]", timeout=60_000)
    assert page.inner_text("#started-job [data-testid=job-outcome]") == "Succeeded"
    assert page.inner_text("#started-job [data-testid=imported]") == "1 imported"
    page.wait_for_selector("#recent-imports >> text=1 imported, 0 updated, 0 unchanged, 0 failed")
    assert_no_reload(page)
    screenshot(page, "import-succeeded")
    run = JobRun.objects.get(kind="tasks.import_upload")
    assert run.status == JobRun.Status.SUCCEEDED and run.outcome == "succeeded", run.error
    task = Task.objects.get(external_id="uploaded-budget")
    assert task.current_revision.files.get(path="budget.csv").blob.size == len("item,cost\nrent,900\nfood,300\n")

    # Every task of the next upload fails: not a green "Succeeded" but a failed run, with each failure's reason.
    page.set_input_files("input[name=archive]", str(_task_folder_zip(tmp_path, "no-query", broken=True)))
    page.click("#import-panel button[type=submit]")
    page.wait_for_selector(
        f"#started-job .job-progress:not(#job-progress-{run.pk}) [data-testid=import-report]", timeout=60_000
    )
    outcome = page.locator("#started-job [data-testid=job-outcome]")
    assert outcome.inner_text() == "Failed: its item failed" and "s-failed" in outcome.get_attribute("class")
    failure = page.locator("#started-job .import-failures tbody tr")
    assert failure.count() == 1 and "no-query" in failure.inner_text()
    page.wait_for_selector("#recent-imports >> text=0 imported, 0 updated, 0 unchanged, 1 failed")
    assert_no_reload(page)
    screenshot(page, "import-all-failed")
    failed_run = JobRun.objects.filter(kind="tasks.import_upload").first()
    reason = failed_run.result["failed"][0]["error"]
    page.click("#started-job a:text('Import tasks')")  # the job's page: the same report
    page.wait_for_selector("#job-report")
    assert "Failed: its item failed" in page.inner_text("#job-live")
    assert reason in page.inner_text("#job-report")

    page.goto(f"{live_server.url}/")
    assert "Import tasks" in page.inner_text("#recent-jobs")
    screenshot(page, "dashboard-with-jobs")
    page.goto(f"{live_server.url}{reverse('tasks:detail', args=['uploaded-budget'])}")
    page.click("#files a:text('budget.csv')")
    page.wait_for_selector("#file-viewer table.csv")


def test_import_form_errors_appear_in_place(page, live_server, admin_user, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("not an archive")
    log_in(page, live_server, admin_user)
    page.goto(f"{live_server.url}{reverse('tasks:import')}")
    mark_document(page)
    page.set_input_files("input[name=archive]", str(notes))
    page.click("#import-panel button[type=submit]")
    page.wait_for_selector("#import-panel .error")
    assert "“notes.txt” is not a .zip, .tar.gz or .jsonl file." in page.inner_text("#import-panel .error")
    assert_no_reload(page)
    assert not JobRun.objects.exists()


def test_every_page_renders_for_an_admin(page, live_server, admin_user):
    """A look at each remaining page (screenshots for review) and the Django admin for the catalog."""
    task = make_task("sales-report", files=[PackageFile("notes.md", b"# Notes\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")])
    log_in(page, live_server, admin_user)
    pages = {
        "file-page": reverse("tasks:file", args=["sales-report", 1, "input", "notes.md"]),
        "diff-single": reverse("tasks:diff", args=["sales-report"]),
        "admin-task-list": reverse("admin:tasks_task_changelist"),
        "admin-task": reverse("admin:tasks_task_change", args=[task.pk]),
        "admin-revision": reverse("admin:tasks_taskrevision_change", args=[task.current_revision_id]),
        "admin-scenarios": reverse("admin:tasks_scenariocategory_change", args=[ScenarioCategory.objects.first().pk]),
    }
    for name, url in pages.items():
        response = page.goto(f"{live_server.url}{url}")
        assert response.status == 200, f"{name}: {response.status}"
        screenshot(page, name)
    page.goto(f"{live_server.url}{pages['file-page']}")
    assert page.locator(".markdown table td").first.inner_text() == "1"
