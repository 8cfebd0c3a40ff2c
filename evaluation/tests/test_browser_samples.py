"""A run's samples and two runs side by side in a real browser: a viewer searches the samples, the list narrows as
they type and choose (without a reload), then opens one task's rollouts of two runs side by side, each check's result
beside its transcript. The runs are built as in test_run_samples (no sandbox).

Screenshots go to $CLAWGYM_SCREENSHOT_DIR (default /tmp/clawgym-screens) for a look by eye.
"""

import pytest

from evaluation.testing import build_world, url
from lib.browser_testing import assert_no_reload, log_in, mark_document, screenshot, watch

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("taxonomy")]

ROWS = "#results tr[data-sample]"


def rows_become(page, n: int) -> None:
    page.wait_for_function(f"document.querySelectorAll('{ROWS}').length === {n}")
    page.wait_for_function("!document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')")


def test_the_sample_filter_narrows_the_list_and_a_row_opens_side_by_side(page, live_server, viewer):
    world = build_world()
    strong, weak = world["strong"], world["weak"]
    watched = watch(page)
    log_in(page, live_server, viewer)
    page.goto(f"{live_server.url}{url('detail', strong.pk)}")
    page.click("[data-testid=samples-link]")
    page.wait_for_url(f"**{url('samples', strong.pk)}")
    assert page.locator(ROWS).count() == 8
    mark_document(page)

    page.locator("input[name=q]").press_sequentially("miscounted", delay=20)
    rows_become(page, 3)
    assert "q=miscounted" in page.url  # the address follows the filters
    assert page.locator(f"{ROWS} mark").first.inner_text() == "miscounted"
    page.fill("input[name=max_score]", "0.6")
    page.locator("input[name=max_score]").press("Enter")
    rows_become(page, 1)
    assert page.locator(ROWS).inner_text().startswith("eval-b")
    page.select_option("select[name=b]", str(weak.pk))
    page.locator(f"{ROWS} [data-testid=side-by-side]").wait_for()
    screenshot(page, "eval-samples")
    assert_no_reload(page)

    page.click(f"{ROWS} [data-testid=side-by-side]")
    page.wait_for_url("**/evaluations/compare/rollouts/**")
    a, b = page.locator("[data-testid=side-a]"), page.locator("[data-testid=side-b]")
    assert strong.name in a.locator("h2").inner_text() and weak.name in b.locator("h2").inner_text()
    assert a.locator("[data-testid=score]").inner_text() == "0.500"  # repeat 1 of eval-b, the row's
    assert b.locator("[data-testid=score]").inner_text() == "0.750"
    # The checks of each, beside its transcript: the same rows on both sides, the differing one marked.
    checks_a, checks_b = a.locator("[data-testid=checks-a] tbody tr"), b.locator("[data-testid=checks-b] tbody tr")
    assert checks_a.count() == checks_b.count() == 5
    assert a.locator("tr[data-check=summary_right] td.num").inner_text() == "0.000"
    assert b.locator("[data-testid=transcript-b]").is_visible() and a.locator("[data-testid=transcript-a]").is_visible()
    assert "miscounted the pears in eval-b" in a.locator("[data-testid=transcript-a]").inner_text()
    box_a, box_b = a.bounding_box(), b.bounding_box()
    assert abs(box_a["y"] - box_b["y"]) < 2 and box_a["x"] + box_a["width"] <= box_b["x"]  # side by side
    b.locator("nav.repeat-picks a", has_text="1").click()  # B's other repeat
    page.wait_for_url("**rb=1**")
    assert page.locator("[data-testid=side-a] [data-testid=score]").inner_text() == "0.500"  # A's repeat is kept
    page.click("a[rel=next]")
    page.wait_for_url("**task=eval-c**")
    assert page.locator("[data-testid=side-b] [data-testid=score]").inner_text() == "0.500"
    screenshot(page, "eval-side-by-side")
    assert not watched.console_errors and not watched.failed_responses
