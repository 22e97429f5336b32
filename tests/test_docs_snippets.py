"""Every ```python block of README.md and docs/*.md runs as written.

Each document's blocks run in order in one namespace, as a reader pastes
them one after another, against a scratch test database, with the models
they name answering offline (``tests/docs/offline.py``). Top-level ``await``
is allowed, as in ``python -m asyncio`` or a notebook. Blocks that assign
``ANVIA_DJANGO`` must pass the app's setting checks, blocks that assign
``urlpatterns`` must route to the app, and ``print(...)  # x`` must print
``x``. A deliberate fragment (``<!-- fragment: why -->`` on the line before
the fence) is compiled, not run. CONTRIBUTING.md has the conventions.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import gc
import inspect
import io
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth.models import AnonymousUser, User
from django.db import connections
from django.http import Http404, HttpResponse
from django.test import RequestFactory, override_settings
from django.urls import URLResolver, get_resolver
from django.urls.resolvers import RegexPattern

from anvia_django import checks
from anvia_django.api.views import ConversationViewSet
from anvia_django.models import AgentRun, Conversation, MemorySummary

from .docs.blocks import Block, documents, python_blocks
from .docs.offline import offline_models  # noqa: F401 - a fixture

pytestmark = [
    # The docs show LangChain's RunnableWithMessageHistory, which it deprecates.
    pytest.mark.filterwarnings(
        "ignore::langchain_core._api.deprecation.LangChainDeprecationWarning"
    ),
    # In the SQLite cells of the three pairs: the docs show the API, which
    # behaves the same on every database (what differs is tested on each).
    pytest.mark.sqlite,
]
# More than a few fragments would mean the docs are drifting from code.
MAX_FRAGMENTS = 3


@pytest.fixture(autouse=True)
def close_loop_thread_connections() -> Iterator[None]:
    """``asyncio.run`` from sync code runs the store's queries on asgiref's
    shared executor thread (and LangChain's sync calls on threads of their
    own), whose connections must be closed before the test database goes."""
    yield
    asyncio.run(sync_to_async(connections.close_all)())
    gc.collect()  # connections of threads that have ended


def run_block(block: Block, namespace: dict[str, Any]) -> str:
    """Run one block in ``namespace``; return what it printed."""
    code = compile(block.code, block.name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        result = eval(code, namespace)  # the repository's own docs
        if inspect.iscoroutine(result):  # the block awaits at top level
            asyncio.run(result)
    return printed.getvalue()


def promised_output(block: Block) -> list[str]:
    """What the block says it prints: ``print(...)  # x``, or ``# x`` on the next line."""
    promised = []
    lines = block.code.splitlines()
    for index, line in enumerate(lines):
        if not line.startswith("print("):
            continue
        if "  # " in line:
            promised.append(line.split("  # ", 1)[1].strip())
        elif index + 1 < len(lines) and lines[index + 1].startswith("# "):
            promised.append(lines[index + 1][2:].strip())
    return [p for p in promised if not p.startswith(("the ", "per run"))]  # descriptions


def check_settings_block(block: Block, namespace: dict[str, Any]) -> None:
    assigned = block.assigned_names()
    if "ANVIA_DJANGO" in assigned:
        with override_settings(ANVIA_DJANGO=namespace["ANVIA_DJANGO"]):
            found = checks.check_settings() + checks.check_inspector_settings()
            # A keyring must be valid; W201 (what search does) is expected.
            found += [m for m in checks.check_encryption() if m.is_serious()]
        assert found == [], (block.name, found)
    if "urlpatterns" in assigned:
        routes = URLResolver(RegexPattern(r"^/"), namespace["urlpatterns"])
        for path in ("/anvia/api/conversations/", *_extra_routes(namespace)):
            match = routes.resolve(path)
            assert match.func is not None, (block.name, path)


def _extra_routes(namespace: dict[str, Any]) -> list[str]:
    # The schema view once the docs mount it; the admin when they include it.
    names = {getattr(p, "name", None) for p in namespace["urlpatterns"]}
    paths = ["/anvia/api/schema/"] if "anvia-schema" in names else []
    if any("admin" in str(getattr(p, "pattern", "")) for p in namespace["urlpatterns"]):
        paths.append("/admin/")
    return paths


@pytest.mark.usefixtures("offline_models", "default_scope")  # docs describe the defaults
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("document", documents(), ids=lambda path: path.name)
def test_every_python_block_runs_in_order(document: Path, tmp_path: Path) -> None:
    run_document(document, tmp_path)


def run_document(document: Path, tmp_path: Path) -> dict[str, Any]:
    """Run the document's blocks in order in one namespace; return it."""
    # BASE_DIR is the one name a reader's project already has (settings.py).
    namespace: dict[str, Any] = {"__name__": f"docs_{document.stem}", "BASE_DIR": tmp_path}
    for block in python_blocks(document):
        if block.fragment is not None:
            ast.parse(block.code)  # a fragment still has to be Python
            continue
        printed = [line.strip() for line in run_block(block, namespace).splitlines()]
        for promise in promised_output(block):
            assert promise in printed, (block.name, promise, printed)
        check_settings_block(block, namespace)
    return namespace


def test_fragments_are_few_and_say_why() -> None:
    fragments = [b for d in documents() for b in python_blocks(d) if b.fragment is not None]
    assert len(fragments) <= MAX_FRAGMENTS, [b.name for b in fragments]
    assert all(len(b.fragment or "") >= 10 for b in fragments)


def test_the_extraction_finds_the_blocks_and_the_marker(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Intro\n\n```python\nx = 1\n```\n\n<!-- fragment: shows a signature -->\n"
        "```python\nf(...)\n```\n\n```bash\nls\n```\n"
    )
    first, second = python_blocks(page)
    assert (first.line, first.code, first.fragment) == (3, "x = 1\n", None)
    assert (second.line, second.fragment) == (8, "shows a signature")
    assert len(python_blocks(page)) == 2


def test_the_project_urls_still_route_the_documented_paths() -> None:
    # The docs' urls.py blocks are checked against a resolver built from
    # them; this keeps that resolver honest against Django's own.
    match = get_resolver().resolve("/anvia/api/conversations/")
    assert match.view_name == "anvia_django:conversation-list"
    view: Any = match.func
    assert (view.cls, view.actions["get"]) == (ConversationViewSet, "list")


@pytest.fixture
def readme(tmp_path: Path, offline_models: None) -> dict[str, Any]:  # noqa: F811
    return run_document(documents()[0], tmp_path)


def post_chat(readme: dict[str, Any], who: User | AnonymousUser, thread: str) -> HttpResponse:
    request = RequestFactory().post(f"/chat/{thread}/", {"message": "Where is order A1?"})
    request.user = who

    async def auser() -> User | AnonymousUser:
        return who

    request.auser = auser  # as AuthenticationMiddleware does
    response: HttpResponse = async_to_sync(readme["chat"])(request, thread)
    return response


@pytest.mark.django_db(transaction=True)
def test_the_readme_agent_is_safe_to_copy(
    readme: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    alice = User.objects.create_user("alice")
    bob = User.objects.create_user("bob")

    # Anonymous visitors do not become one shared user "None": they log in first.
    anonymous = post_chat(readme, AnonymousUser(), "t-1")
    assert anonymous.status_code == 302
    assert not Conversation.objects.filter(user_id="None").exists()

    assert post_chat(readme, alice, "t-1").status_code == 200
    # Another user's thread is a 404, as if it did not exist, and the
    # refused run is not logged (it was logged twice before).
    with caplog.at_level(logging.WARNING), pytest.raises(Http404):
        post_chat(readme, bob, "t-1")
    assert caplog.records == []
    assert Conversation.objects.get(session_id="t-1").user_id == str(alice.pk)
    assert post_chat(readme, bob, "t-2").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_the_readme_lifecycle_example_leaves_what_it_says(readme: dict[str, Any]) -> None:
    original = Conversation.objects.get(session_id="thread-9")
    assert original.message_count == 0  # rewound to message 0
    assert Conversation.objects.get(session_id="thread-9-b").forked_from_id == original.pk
    assert not MemorySummary.objects.exists()  # 2 messages: far below the budget
    assert (AgentRun.objects.filter(conversation=original).get().total_tokens or 0) > 0
