"""What the real-browser tests share: Debian's Chromium driven by Playwright
on a thread of its own, skipped (or, in CI, failed) without a browser, and
the demo's staff account as ``demo_setup`` creates it.

Playwright's sync API runs an event loop in its thread; keeping it off the
test's thread keeps Django's ORM there free of SynchronousOnlyOperation.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Callable
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]

# CI sets this so a missing browser fails the run instead of skipping silently.
REQUIRED = os.environ.get("ANVIA_REQUIRE_BROWSER") == "1"

BROWSER_MARKS = [
    pytest.mark.browser,
    # In the SQLite cells (three Python and Django pairs): what a browser
    # sees of a page does not depend on the database, and the queries behind
    # the admin and the API are tested on every database without one.
    pytest.mark.sqlite,
    pytest.mark.skipif(
        not REQUIRED and not CHROMIUM.exists(),
        reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)",
    ),
    pytest.mark.skipif(
        not REQUIRED and importlib.util.find_spec("playwright") is None,
        reason="the playwright package is not installed (pip install playwright)",
    ),
]
"""``pytestmark`` of a browser test module."""

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo-browser-password"


def create_demo_account() -> None:
    """The staff account ``make demo`` prints, made the same way."""
    from example_project.demo.management.commands import demo_setup

    call_command(demo_setup.Command(), "--password", DEMO_PASSWORD, stdout=StringIO())


def log_in_as_demo(page: Any, base_url: str) -> None:
    """Log ``page`` in through the admin's login form; ends on the admin index."""
    page.goto(f"{base_url}/admin/login/?next=/admin/")
    page.fill("#id_username", DEMO_USERNAME)
    page.fill("#id_password", DEMO_PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{base_url}/admin/")


def run_in_browser(walk: Callable[[Any, str], dict[str, Any]], base_url: str) -> dict[str, Any]:
    """Run ``walk(browser, base_url)`` in headless Chromium on its own
    thread; its result, or its exception raised here."""
    outcome: dict[str, Any] = {}

    def drive() -> None:
        from playwright.sync_api import sync_playwright

        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
                )
                try:
                    outcome["result"] = walk(browser, base_url)
                finally:
                    browser.close()
        except BaseException as error:  # reported on the test's thread
            outcome["error"] = error

    worker = threading.Thread(target=drive)
    worker.start()
    worker.join(timeout=180)
    assert not worker.is_alive(), "the browser did not finish in time"
    if "error" in outcome:
        raise outcome["error"]
    result: dict[str, Any] = outcome["result"]
    return result
