"""DjangoSession.session_settings reads settings as the SDK's own sessions do
(issue 13, cases 1 and 2): the SDK's coercion decides what is accepted and
what raises, and the default is ``SessionSettings()``."""

from __future__ import annotations

from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anvia_django.core.memory import InvalidMemoryInputError
from anvia_django.models import Conversation
from tests.helpers import run

pytest.importorskip("agents")

from agents import Agent, RunConfig, SQLiteSession
from agents.items import TResponseInputItem
from agents.memory import SessionSettings
from agents.testing import ScriptedModel, assistant_message

from anvia_django.integrations.openai_agents import DjangoSession

from .agents_runner import RUNNER_METHODS, drive

pytestmark = pytest.mark.django_db

PROPERTY = settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def user(text: str) -> TResponseInputItem:
    return cast(TResponseInputItem, {"role": "user", "content": text})


def outcome(make: Any) -> tuple[str, str] | SessionSettings:
    """What constructing a session gives: its settings, or the error raised."""
    try:
        return cast(SessionSettings, make().session_settings)
    except Exception as exc:
        return (type(exc).__name__, str(exc))


def sdk_session(value: Any) -> SQLiteSession:
    session = SQLiteSession("reference", session_settings=value)
    session.close()
    return session


# --- case 1: unknown and ill-typed settings raise as in the SDK -----------------------


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        ({"limitt": 2}, TypeError, "Unknown session settings: limitt"),
        ({"limit": 2, "max_items": 5}, TypeError, "Unknown session settings: max_items"),
        (5, TypeError, "must be a SessionSettings instance or a dict, got int"),
        ([("limit", 2)], TypeError, "got list"),
        ({"limit": "two"}, ValueError, "limit"),  # pydantic's ValidationError
        ({"limit": 1.5}, ValueError, "limit"),
    ],
)
def test_unknown_and_ill_typed_settings_raise_before_anything_is_stored(
    value: Any, error: type[Exception], message: str, django_assert_num_queries
) -> None:
    with django_assert_num_queries(0), pytest.raises(error, match=message):
        DjangoSession("settings", session_settings=value)
    with pytest.raises(error, match=message):
        sdk_session(value)
    assert not Conversation.objects.exists()


@PROPERTY
@given(
    st.dictionaries(
        st.sampled_from(["limit", "limitt", "Limit", "", "session"]),
        st.none()
        | st.booleans()
        | st.integers(min_value=0, max_value=10**6)
        | st.floats(allow_nan=False)
        | st.text(max_size=4)
        | st.lists(st.integers(), max_size=2),
        max_size=3,
    )
)
def test_any_settings_dict_is_read_exactly_as_the_sdk_reads_it(value: dict[str, Any]) -> None:
    ours = outcome(lambda: DjangoSession("s", session_settings=value))
    theirs = outcome(lambda: sdk_session(value))
    if isinstance(theirs, SessionSettings) and (theirs.limit or 0) < 0:
        # The one deliberate difference: the SDK reads -1.0 or "-3" as a
        # negative limit ("no limit" in SQLiteSession); we refuse it.
        assert isinstance(ours, tuple)
        assert ours[0] == "InvalidMemoryInputError"
    else:
        assert ours == theirs


def test_coerced_settings_govern_reads() -> None:
    # The SDK's coercion turns "2" into 2; the limit then applies to get_items.
    session = DjangoSession("coerced", session_settings={"limit": "2"})
    assert session.session_settings == SessionSettings(limit=2)
    run(session.add_items, [user(str(n)) for n in range(4)])
    assert run(session.get_items) == [user("2"), user("3")]


@pytest.mark.parametrize("value", [{"limit": -1}, SessionSettings(limit=-3)])
def test_a_negative_limit_is_refused_at_construction(value: Any) -> None:
    # The SDK's SQLite session reads a negative limit as "everything"; we refuse it.
    with pytest.raises(InvalidMemoryInputError, match=r"session_settings\.limit"):
        DjangoSession("negative", session_settings=value)


# --- case 2: the default is SessionSettings() ----------------------------------------------


def test_settings_default_to_an_empty_session_settings_like_the_sdk() -> None:
    session = DjangoSession("defaults")
    assert isinstance(session.session_settings, SessionSettings)
    assert session.session_settings == sdk_session(None).session_settings == SessionSettings()
    assert session.session_settings.limit is None
    assert session.session_settings.resolve({"limit": 4}).limit == 4
    # No default limit: every item comes back.
    run(session.add_items, [user(str(n)) for n in range(5)])
    assert len(run(session.get_items)) == 5


@pytest.mark.parametrize("method", RUNNER_METHODS)
def test_run_config_settings_resolve_over_the_default(method: str) -> None:
    session = DjangoSession("resolved")
    run(session.add_items, [user(f"old {n}") for n in range(4)])
    model = ScriptedModel([[assistant_message("ok")]])
    agent = Agent(name="test", model=model)
    config = RunConfig(session_settings=SessionSettings(limit=1))
    drive(method, agent, "new", session=session, run_config=config)
    assert model.calls[-1].input == [user("old 3"), user("new")]
