"""Helpers of the Google ADK suites: the backends held to the session
contract, and events.

No module of the suites imports ADK when pytest collects it (about 2.5 s
of CPU in every pytest process): its names are imported in the helpers and
the tests that use them, and :data:`needs_adk` skips the suites without it."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

import pytest

from anvia_django.integrations import adk
from tests.helpers import run

if TYPE_CHECKING:
    from google.adk.events.event import Event
    from google.adk.sessions.base_session_service import BaseSessionService


def _adk_installed() -> bool:
    try:
        return find_spec("google.adk") is not None
    except ModuleNotFoundError:  # no google namespace at all
        return False


needs_adk = pytest.mark.skipif(not _adk_installed(), reason="needs google-adk")


def in_memory() -> BaseSessionService:
    from google.adk.sessions.in_memory_session_service import InMemorySessionService

    return InMemorySessionService()


@dataclass(frozen=True)
class Backend:
    """A session service held to the contract, and the behaviours it
    fails, each with the reason (the test is then a strict xfail)."""

    name: str
    make: Callable[[], BaseSessionService]
    divergences: dict[str, str] = field(default_factory=dict)


BACKENDS = [
    Backend("django", lambda: adk.DjangoSessionService()),
    # ADK's own reference service: every behaviour is checked against it
    # too, so a test here states ADK's contract, not ours.
    Backend(
        "adk_in_memory",
        in_memory,
        divergences={
            "test_an_append_from_a_superseded_session_is_refused": (
                "InMemorySessionService keeps one stored object per session and "
                "appends to it whatever copy the caller holds; it has no stale check."
            ),
        },
    ),
]


@pytest.fixture(params=BACKENDS, ids=lambda backend: backend.name)
def service(request: pytest.FixtureRequest) -> BaseSessionService:
    backend: Backend = request.param
    reason = backend.divergences.get(request.node.originalname)
    if reason is not None:
        request.node.add_marker(pytest.mark.xfail(strict=True, reason=reason))
    return backend.make()


def scenario(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    """An async test body run as a sync test, on the test's connection."""

    @functools.wraps(fn)
    def test(*args: Any, **kwargs: Any) -> Any:
        return run(fn, *args, **kwargs)

    return test


def event(
    invocation_id: str = "inv",
    *,
    author: str = "user",
    text: str | None = None,
    delta: dict[str, Any] | None = None,
    **fields: Any,
) -> Event:
    from google.adk.events.event import Event
    from google.adk.events.event_actions import EventActions
    from google.genai import types

    content = types.Content(role="user", parts=[types.Part(text=text)]) if text else None
    return Event(
        invocation_id=invocation_id,
        author=author,
        content=content,
        actions=EventActions(state_delta=delta or {}),
        **fields,
    )
