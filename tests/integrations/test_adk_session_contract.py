"""ADK's session service contract, behaviour by behaviour, for
``DjangoSessionService`` and, as the reference, ADK's in-memory service.

The behaviours are those ADK's own contract suite holds every registered
session service to (its ``session_service`` fixture), read as a list and
written anew here; where a backend departs from one, ``adk_support.BACKENDS``
says why and the test is a strict xfail for it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from tests.integrations.adk_support import event, needs_adk, scenario, service

if TYPE_CHECKING:
    from google.adk.sessions.base_session_service import BaseSessionService

__all__ = ["service"]

pytestmark = [pytest.mark.django_db, needs_adk]

APP = "my_app"


@scenario
async def test_an_unknown_session_reads_as_none(service: BaseSessionService) -> None:
    assert await service.get_session(app_name=APP, user_id="u", session_id="nope") is None


@scenario
async def test_a_created_session_reads_back_equal_and_deletes(
    service: BaseSessionService,
) -> None:
    before = time.time()
    created = await service.create_session(app_name=APP, user_id="u", state={"k": "v"})
    assert (created.app_name, created.user_id, created.state) == (APP, "u", {"k": "v"})
    assert created.id
    assert created.events == []
    assert before - 1 <= created.last_update_time <= time.time() + 1
    got = await service.get_session(app_name=APP, user_id="u", session_id=created.id)
    assert got == created
    await service.delete_session(app_name=APP, user_id="u", session_id=created.id)
    assert await service.get_session(app_name=APP, user_id="u", session_id=created.id) is None
    # Deleting it again, or a session never stored, is not an error.
    await service.delete_session(app_name=APP, user_id="u", session_id=created.id)


@scenario
async def test_a_given_session_id_is_kept_and_cannot_be_taken_twice(
    service: BaseSessionService,
) -> None:
    from google.adk.errors.already_exists_error import AlreadyExistsError

    created = await service.create_session(app_name=APP, user_id="u", session_id="s1")
    assert created.id == "s1"
    with pytest.raises(AlreadyExistsError):
        await service.create_session(app_name=APP, user_id="u", session_id="s1")
    # Another user, or another app, may use the same id.
    await service.create_session(app_name=APP, user_id="u2", session_id="s1")
    await service.create_session(app_name="other_app", user_id="u", session_id="s1")


@scenario
async def test_a_padded_session_id_names_the_session_without_the_padding(
    service: BaseSessionService,
) -> None:
    await service.create_session(app_name=APP, user_id="u", session_id="  s1 ")
    got = await service.get_session(app_name=APP, user_id="u", session_id=" s1  ")
    assert got is not None
    assert got.id == "s1"
    await service.delete_session(app_name=APP, user_id="u", session_id="s1 ")
    assert await service.get_session(app_name=APP, user_id="u", session_id="s1") is None


@scenario
async def test_sessions_list_per_user_and_for_all_users_with_their_state(
    service: BaseSessionService,
) -> None:
    for user, session_id in [("u1", "a"), ("u1", "b"), ("u2", "c")]:
        await service.create_session(
            app_name=APP, user_id=user, session_id=session_id, state={"k": session_id}
        )
    await service.create_session(app_name="other_app", user_id="u1", session_id="x")
    u1 = (await service.list_sessions(app_name=APP, user_id="u1")).sessions
    assert {s.id: s.state for s in u1} == {"a": {"k": "a"}, "b": {"k": "b"}}
    assert all(s.events == [] and s.user_id == "u1" and s.app_name == APP for s in u1)
    everyone = (await service.list_sessions(app_name=APP, user_id=None)).sessions
    assert {(s.user_id, s.id) for s in everyone} == {("u1", "a"), ("u1", "b"), ("u2", "c")}
    assert (await service.list_sessions(app_name=APP, user_id="nobody")).sessions == []


@scenario
async def test_sessions_list_oldest_update_first(service: BaseSessionService) -> None:
    sessions = [
        await service.create_session(app_name=APP, user_id="u", session_id=name)
        for name in ("a", "b", "c")
    ]
    base = time.time() + 10
    for offset, session in zip((3, 1, 2), sessions, strict=True):
        await service.append_event(session, event(timestamp=base + offset))
    listed = (await service.list_sessions(app_name=APP, user_id="u")).sessions
    assert [s.id for s in listed] == ["b", "c", "a"]
    assert [s.last_update_time for s in listed] == pytest.approx(
        [base + 1, base + 2, base + 3], abs=1e-6
    )


@scenario
async def test_app_state_is_shared_by_every_user_of_the_app(service: BaseSessionService) -> None:
    s1 = await service.create_session(
        app_name=APP, user_id="u1", session_id="s1", state={"app:k1": "v1"}
    )
    await service.append_event(s1, event(delta={"app:k2": "v2"}))
    s2 = await service.create_session(app_name=APP, user_id="u2", session_id="s2")
    assert s2.state == {"app:k1": "v1", "app:k2": "v2"}
    again = await service.get_session(app_name=APP, user_id="u1", session_id="s1")
    assert again is not None
    assert again.state == {"app:k1": "v1", "app:k2": "v2"}
    other = await service.create_session(app_name="other_app", user_id="u1")
    assert other.state == {}


@scenario
async def test_user_state_is_shared_by_the_users_sessions_only(
    service: BaseSessionService,
) -> None:
    s1 = await service.create_session(
        app_name=APP, user_id="u1", session_id="s1", state={"user:k1": "v1"}
    )
    await service.append_event(s1, event(delta={"user:k2": "v2"}))
    mine = await service.create_session(app_name=APP, user_id="u1", session_id="s1b")
    assert mine.state == {"user:k1": "v1", "user:k2": "v2"}
    theirs = await service.create_session(app_name=APP, user_id="u2", session_id="s2")
    assert theirs.state == {}
    assert await service.get_user_state(app_name=APP, user_id="u1") == {"k1": "v1", "k2": "v2"}
    assert await service.get_user_state(app_name=APP, user_id="u2") == {}


@scenario
async def test_session_state_stays_in_its_session(service: BaseSessionService) -> None:
    s1 = await service.create_session(
        app_name=APP, user_id="u1", session_id="s1", state={"sk1": "v1"}
    )
    await service.append_event(s1, event(delta={"sk2": "v2"}))
    assert s1.state == {"sk1": "v1", "sk2": "v2"}
    got = await service.get_session(app_name=APP, user_id="u1", session_id="s1")
    assert got is not None
    assert got.state == {"sk1": "v1", "sk2": "v2"}
    other = await service.create_session(app_name=APP, user_id="u1", session_id="s1b")
    assert other.state == {}


@scenario
async def test_temp_state_reaches_the_session_object_but_is_never_stored(
    service: BaseSessionService,
) -> None:
    session = await service.create_session(
        app_name=APP, user_id="u", session_id="s1", state={"temp:at_create": 1}
    )
    assert "temp:at_create" not in session.state
    await service.append_event(session, event(delta={"temp:k": "v1", "sk": "v2"}))
    assert session.state["temp:k"] == "v1"  # for the rest of the invocation
    got = await service.get_session(app_name=APP, user_id="u", session_id="s1")
    assert got is not None
    assert got.state == {"sk": "v2"}
    assert got.events[0].actions.state_delta == {"sk": "v2"}


@scenario
async def test_a_session_is_read_by_its_own_user_only(service: BaseSessionService) -> None:
    s1 = await service.create_session(app_name=APP, user_id="u1", session_id="s1")
    await service.append_event(s1, event(text="mine"))
    await service.create_session(app_name=APP, user_id="u2", session_id="s1")
    theirs = await service.get_session(app_name=APP, user_id="u2", session_id="s1")
    assert theirs is not None
    assert theirs.user_id == "u2"
    assert theirs.events == []


@scenario
async def test_an_event_with_every_field_set_reads_back_equal(
    service: BaseSessionService,
) -> None:
    from google.adk.events.event_actions import EventActions
    from google.genai import types

    session = await service.create_session(app_name=APP, user_id="u")
    content = types.Content(
        role="user",
        parts=[
            types.Part(text="see the picture"),
            types.Part.from_bytes(data=b"\x89PNG\x00\xff", mime_type="image/png"),
        ],
    )
    full = event(
        "inv",
        turn_complete=True,
        partial=False,
        long_running_tool_ids={"tool1"},
        error_code="error_code",
        error_message="error_message",
        interrupted=True,
        grounding_metadata=types.GroundingMetadata(
            web_search_queries=["q"],
            search_entry_point=types.SearchEntryPoint(sdk_blob=b"blob\x00"),
        ),
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=1, candidates_token_count=1, total_token_count=2
        ),
        citation_metadata=types.CitationMetadata(),
        custom_metadata={"custom_key": "custom_value"},
        input_transcription=types.Transcription(text="in", finished=True),
        output_transcription=types.Transcription(text="out", finished=True),
    )
    full.content = content
    full.actions = EventActions(
        artifact_delta={"file": 0}, transfer_to_agent="agent", escalate=True
    )
    await service.append_event(session, full)
    assert session.events[0].content == content
    got = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got == session
    assert got.events[0].content == content


@scenario
async def test_an_append_moves_last_update_time_to_the_events_timestamp(
    service: BaseSessionService,
) -> None:
    session = await service.create_session(app_name=APP, user_id="u")
    later = session.last_update_time + 10
    await service.append_event(session, event(timestamp=later))
    assert session.last_update_time == pytest.approx(later, abs=1e-6)
    got = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got is not None
    assert got.last_update_time == pytest.approx(later, abs=1e-6)


@scenario
async def test_an_append_from_a_superseded_session_is_refused(
    service: BaseSessionService,
) -> None:
    from google.adk.errors import StaleSessionError

    original = await service.create_session(app_name=APP, user_id="u")
    now = time.time()
    await service.append_event(original, event("inv1", timestamp=now + 1, delta={"sk1": "v1"}))
    current = await service.get_session(app_name=APP, user_id="u", session_id=original.id)
    assert current is not None
    await service.append_event(current, event("inv2", timestamp=now + 2, delta={"sk2": "v2"}))
    with pytest.raises(StaleSessionError):
        await service.append_event(original, event("inv3", timestamp=now + 3, delta={"sk3": "v3"}))
    final = await service.get_session(app_name=APP, user_id="u", session_id=original.id)
    assert final is not None
    assert [e.invocation_id for e in final.events] == ["inv1", "inv2"]
    assert final.state == {"sk1": "v1", "sk2": "v2"}
    # Read again, it appends.
    await service.append_event(final, event("inv3", timestamp=now + 3))
    assert len(final.events) == 3


@scenario
async def test_get_session_keeps_the_newest_events_and_those_from_a_timestamp(
    service: BaseSessionService,
) -> None:
    from google.adk.sessions.base_session_service import GetSessionConfig

    session = await service.create_session(app_name=APP, user_id="u")
    for i in range(1, 6):
        await service.append_event(session, event(f"inv{i}", timestamp=i))

    async def timestamps(**config: float | int) -> list[float]:
        got = await service.get_session(
            app_name=APP,
            user_id="u",
            session_id=session.id,
            config=GetSessionConfig(**config),  # type: ignore[arg-type]
        )
        assert got is not None
        return [e.timestamp for e in got.events]

    assert await timestamps() == [1, 2, 3, 4, 5]
    assert await timestamps(num_recent_events=3) == [3, 4, 5]
    assert await timestamps(num_recent_events=10) == [1, 2, 3, 4, 5]
    assert await timestamps(num_recent_events=0) == []
    assert await timestamps(after_timestamp=4.0) == [4, 5]
    assert await timestamps(after_timestamp=50.0) == []
    assert await timestamps(after_timestamp=2.0, num_recent_events=2) == [4, 5]
    assert await timestamps(after_timestamp=4.0, num_recent_events=3) == [4, 5]
    with pytest.raises(ValueError, match="num_recent_events"):
        GetSessionConfig(num_recent_events=-1)


@scenario
async def test_events_read_back_in_the_order_they_were_appended(
    service: BaseSessionService,
) -> None:
    from google.adk.sessions.base_session_service import GetSessionConfig

    session = await service.create_session(app_name=APP, user_id="u")
    moment = time.time()
    for i in range(4):  # one timestamp for all: the order is the append order
        await service.append_event(session, event(f"inv{i}", timestamp=moment))
    got = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got is not None
    assert [e.invocation_id for e in got.events] == ["inv0", "inv1", "inv2", "inv3"]
    recent = await service.get_session(
        app_name=APP,
        user_id="u",
        session_id=session.id,
        config=GetSessionConfig(num_recent_events=2),
    )
    assert recent is not None
    assert [e.invocation_id for e in recent.events] == ["inv2", "inv3"]


@scenario
async def test_a_partial_event_is_not_stored(service: BaseSessionService) -> None:
    session = await service.create_session(app_name=APP, user_id="u")
    await service.append_event(session, event(partial=True, text="stream"))
    assert session.events == []
    got = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got is not None
    assert got.events == []


@scenario
async def test_an_append_to_a_session_not_stored_raises(service: BaseSessionService) -> None:
    from google.adk.errors.session_not_found_error import SessionNotFoundError
    from google.adk.sessions.session import Session

    ghost = Session(app_name=APP, user_id="u", id="ghost")
    with pytest.raises(SessionNotFoundError):
        await service.append_event(ghost, event())
    assert await service.get_session(app_name=APP, user_id="u", session_id="ghost") is None


@scenario
async def test_an_equal_event_appended_again_is_stored_once(service: BaseSessionService) -> None:
    session = await service.create_session(app_name=APP, user_id="u")
    once = event(text="hello", delta={"count": 1})
    await service.append_event(session, once)
    await service.append_event(session, once.model_copy(deep=True))
    got = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got is not None
    assert [e.id for e in got.events] == [once.id]


@scenario
async def test_deleting_a_session_keeps_the_app_and_user_state(
    service: BaseSessionService,
) -> None:
    session = await service.create_session(
        app_name=APP, user_id="u", state={"app:a": 1, "user:b": 2, "c": 3}
    )
    await service.delete_session(app_name=APP, user_id="u", session_id=session.id)
    fresh = await service.create_session(app_name=APP, user_id="u")
    assert fresh.state == {"app:a": 1, "user:b": 2}
