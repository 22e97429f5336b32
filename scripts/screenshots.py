#!/usr/bin/env python
"""Regenerate docs/screenshots/*.png from a throwaway run of the example project.

Needs Playwright's Python package (``pip install playwright``) and a
Chromium; it uses the system one (``apt-get install chromium``,
``/usr/bin/chromium``) or ``$CHROMIUM``, never downloading a browser.

    python scripts/screenshots.py

Migrates a fresh SQLite database in a temporary directory, creates the demo
staff account, seeds the demo conversations, serves the project on a free
local port and photographs the chat page (after one exchange), the admin's
conversation list and one conversation's transcript page.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import Page, ViewportSize, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "screenshots"
PASSWORD = "screenshots-only"
SIZE: ViewportSize = {"width": 1280, "height": 900}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "example_project.settings",
            "ANVIA_DEMO_SQLITE": str(Path(scratch) / "screenshots.sqlite3"),
            "DEMO_PASSWORD": PASSWORD,
        }
        for name in ("DATABASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
            env.pop(name, None)  # the offline model, so every run looks alike
        manage = [sys.executable, str(ROOT / "manage.py")]
        for command in (["migrate", "-v0"], ["demo_setup"], ["seed_demo"]):
            subprocess.run([*manage, *command], env=env, check=True, stdout=subprocess.DEVNULL)
        port = free_port()
        server = subprocess.Popen(
            [*manage, "runserver", f"127.0.0.1:{port}", "--noreload"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            wait_for(base)
            photograph(base)
        finally:
            server.terminate()
            server.wait(timeout=10)


def photograph(base: str) -> None:
    executable = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(viewport=SIZE)

        page.goto(f"{base}/")
        for prompt in ("Hi!", "Where is my order 1042?"):
            page.fill("#prompt", prompt)
            page.press("#prompt", "Enter")
            page.wait_for_function("!document.getElementById('prompt').disabled")
        page.wait_for_selector("#log li.assistant >> nth=1")
        shoot(page, "chat.png")

        page.goto(f"{base}/admin/login/")
        page.fill("#id_username", "demo")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        page.goto(f"{base}/anvia/api/conversations/?limit=3")
        pretty = page.locator("input[type=checkbox]")  # Chromium's JSON viewer
        if pretty.count():
            pretty.first.check()
        shoot(page, "api-conversations.png")
        response = page.goto(f"{base}/admin/anvia_django/conversation/")
        if response is None or response.status != 200:
            sys.exit("The admin has no conversation pages (is anvia_django.admin installed?).")
        shoot(page, "admin-conversations.png")
        page.click("#result_list a >> text=demo-alice-espresso")
        page.wait_for_load_state()
        shoot(page, "admin-transcript.png", full_page=True)
        browser.close()


def shoot(page: Page, name: str, *, full_page: bool = False) -> None:
    page.screenshot(path=str(OUT / name), full_page=full_page)
    print(f"wrote {OUT / name}")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


if __name__ == "__main__":
    main()
