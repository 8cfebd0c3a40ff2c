"""Fixtures and helpers of the browser tests: Debian's chromium driven by Playwright against a live server.

    pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("taxonomy")]  # taxonomy: tasks.testing

    def test_something(page, live_server, reviewer):
        log_in(page, live_server, reviewer)

Screenshots go to $CLAWGYM_SCREENSHOT_DIR (default /tmp/clawgym-screens) for a look by eye. The `browser` fixture
sets DJANGO_ALLOW_ASYNC_UNSAFE while it runs, and only then: Playwright's sync API runs an event loop in the test's
thread, and Django's ORM would refuse to run beside it. Everywhere else the ORM's check stays on, so a synchronous
database call on an event loop (the recording proxy's) fails its tests (llm/tests/test_proxy_async_safety.py).
"""

import os
from pathlib import Path

import pytest

from lib.testing import PASSWORD

ASYNC_UNSAFE = "DJANGO_ALLOW_ASYNC_UNSAFE"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
SCREENS = Path(os.environ.get("CLAWGYM_SCREENSHOT_DIR", "/tmp/clawgym-screens"))


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"browser tests need Debian's chromium at {CHROMIUM} (apt-get install chromium)")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ASYNC_UNSAFE, "true")  # while Playwright's loop is in this thread; restored after the module
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield browser
            browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    page = context.new_page()
    # What a test waits for should come within a second or two; 30 s leaves room for a loaded 2-core CI machine
    # (15 s was passed once by a reviewer's save while the rest of the suite ran beside it).
    page.set_default_timeout(30_000)
    yield page
    context.close()


def screenshot(page, name: str) -> None:
    SCREENS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENS / f"{name}.png"), full_page=True)


def log_in(page, live_server, user) -> None:
    page.goto(f"{live_server.url}/")
    assert "/login/" in page.url  # anonymous users are sent to the login form
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")


class PageWatch:
    """What went wrong in a page while a test drove it: console errors (htmx logs its own there) and HTTP errors."""

    def __init__(self, page):
        self.console_errors: list[str] = []
        self.failed_responses: list[str] = []
        page.on("console", lambda msg: msg.type == "error" and self.console_errors.append(msg.text))
        page.on("pageerror", lambda exc: self.console_errors.append(str(exc)))
        page.on("response", lambda r: r.status >= 400 and self.failed_responses.append(f"{r.status} {r.url}"))


def watch(page) -> PageWatch:
    """Start recording the page's console errors and failed responses (call before the first goto)."""
    return PageWatch(page)


def mark_document(page) -> None:
    """Tag the current document; the tag survives htmx swaps but not a full page load."""
    page.evaluate("window.__noReload = 'still here'")


def assert_no_reload(page) -> None:
    assert page.evaluate("window.__noReload") == "still here", "the page was reloaded instead of swapped by htmx"
