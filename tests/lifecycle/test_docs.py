"""docs/lifecycle.md runs as written, and prints what it says it prints."""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

GUIDE = Path(__file__).resolve().parent.parent.parent / "docs" / "lifecycle.md"


@pytest.fixture(autouse=True)
def close_the_executor_connection() -> Iterator[None]:
    """The examples call ``asyncio.run`` from sync code, as a script would:
    the store's queries then run on asgiref's shared executor thread, whose
    connection must be closed or the test database cannot be dropped."""
    yield
    asyncio.run(sync_to_async(connections.close_all)())


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", GUIDE.read_text(), flags=re.DOTALL)


def promised_output(block: str) -> list[str]:
    """What the block's comments say it prints: ``print(...)  # x`` or a ``# x`` line after."""
    promised = []
    lines = block.splitlines()
    for index, line in enumerate(lines):
        if not line.startswith("print("):
            continue
        if "#" in line:
            promised.append(line.split("#", 1)[1].strip())
        elif index + 1 < len(lines) and lines[index + 1].startswith("# "):
            promised.append(lines[index + 1][2:].strip())
    return promised


@pytest.mark.django_db(transaction=True)
def test_every_example_runs_in_order_and_prints_what_it_says() -> None:
    namespace: dict[str, object] = {"__name__": "docs_lifecycle"}
    found = blocks()
    assert len(found) == 5
    for number, block in enumerate(found, start=1):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, f"docs/lifecycle.md block {number}", "exec"), namespace)
        printed = [line.strip() for line in out.getvalue().splitlines()]
        for promise in promised_output(block):
            if promise.startswith(("the original", "the position")):
                continue  # a description, not the printed value
            assert any(promise == line for line in printed), (number, promise, printed)


def readme_block() -> str:
    readme = GUIDE.parent.parent / "README.md"
    section = readme.read_text().split("## Runs, edit-and-regenerate, long sessions", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


@pytest.mark.django_db(transaction=True)
def test_the_readme_example_runs_given_a_model() -> None:
    from anvia_django.models import Conversation, MemorySummary

    from .models import EchoModel

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(readme_block(), "README.md", "exec"), {"model": EchoModel()})
    assert int(out.getvalue().strip()) > 0
    original = Conversation.objects.get(session_id="thread-9")
    assert original.message_count == 0  # rewound to 0
    assert Conversation.objects.get(session_id="thread-9-b").forked_from_id == original.pk
    assert not MemorySummary.objects.exists()  # 2 messages: far below the budget
