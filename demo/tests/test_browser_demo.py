"""The demo models on the Models page in a real browser: each demo endpoint's row says "demo" (a real model's does
not), and its connection test reaches the demo server on loopback."""

import pytest

from demo.services import DEMO_ENDPOINTS
from lib.browser_testing import log_in, screenshot
from llm.models import ModelEndpoint

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("taxonomy")]


def test_the_models_page_marks_every_demo_model_and_tests_its_connection(page, live_server, admin_user, demo_server):
    ModelEndpoint.objects.create(
        name="gpt-real", base_url="https://api.example.com/v1", model="gpt-real-1", roles=["agent"]
    )
    log_in(page, live_server, admin_user)
    page.goto(f"{live_server.url}/llm/endpoints/")
    for name in DEMO_ENDPOINTS:
        badge = page.locator(f"#endpoint-{name} .badge.demo")
        assert badge.inner_text() == "demo"
        assert "scripted demo model" in badge.get_attribute("title")
    assert page.locator("#endpoint-gpt-real .badge.demo").count() == 0

    page.locator("#endpoint-demo-judge button", has_text="Test connection").click()
    check = page.locator("#check-demo-judge")
    check.locator(".ok").wait_for()
    assert "ClawGym demo model" in check.inner_text()
    screenshot(page, "demo-models")
