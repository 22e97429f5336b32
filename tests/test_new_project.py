"""The app in a brand-new ``django-admin startproject``, as a user installs it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

SCRIPT = """
import asyncio
from anvia_django.core.memory import MemoryAppendInput, MemoryContext
from anvia_django.store import DjangoMemoryStore

async def main():
    store = DjangoMemoryStore()
    context = MemoryContext("thread_123", user_id="user_456")
    hi = {"role": "user", "content": "Hi"}
    hello = {"role": "assistant", "content": "Hello"}
    await store.append(MemoryAppendInput(context, "run-1", 1, [hi]))
    await store.append(MemoryAppendInput(context, "run-1", 2, [hello]))
    print(await store.load(context))

asyncio.run(main())
"""


@pytest.fixture
def database_settings() -> Iterator[str]:
    if connection.vendor != "postgresql":
        yield textwrap.dedent("""
            DATABASES["default"]["OPTIONS"] = {"transaction_mode": "IMMEDIATE"}
        """)
        return
    import psycopg

    params = connection.settings_dict
    name = f"anvia_newproject_{uuid.uuid4().hex[:8]}"
    dsn = {"host": params["HOST"], "port": params["PORT"], "user": params["USER"]}
    dsn["dbname"] = "postgres"
    with psycopg.connect(**dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield textwrap.dedent(f"""
            DATABASES = {{"default": {{
                "ENGINE": "django.db.backends.postgresql", "NAME": "{name}",
                "HOST": "{params["HOST"]}", "PORT": "{params["PORT"]}", "USER": "{params["USER"]}",
            }}}}
        """)
    finally:
        with psycopg.connect(**dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_startproject_migrate_and_use_the_store(tmp_path: Path, database_settings: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}

    def run(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, *args],
            cwd=tmp_path / "newsite",
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    subprocess.run(
        [sys.executable, "-m", "django", "startproject", "newsite"],
        cwd=tmp_path,
        env=env,
        check=True,
    )
    settings_file = tmp_path / "newsite" / "newsite" / "settings.py"
    settings_file.write_text(
        settings_file.read_text()
        + '\nINSTALLED_APPS += ["rest_framework", "anvia_django"]\n'
        + database_settings
    )
    run("manage.py", "check", "--fail-level", "WARNING")
    run("manage.py", "migrate", "-v", "0")
    output = run("manage.py", "shell", "-c", SCRIPT)
    # The last line: Django 5.2's shell may first report its automatic imports.
    assert output.strip().splitlines()[-1] == (
        "[{'role': 'user', 'content': 'Hi'}, {'role': 'assistant', 'content': 'Hello'}]"
    )
