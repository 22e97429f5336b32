"""``record_error`` records whatever it is given, as big as it is.

An exception that cannot be printed (its ``__str__`` or ``__repr__``
raises, its traceback cannot be formatted, its causes loop) is recorded
with a placeholder where the text would be, and an agent's caller still
gets that very exception. A failed run too big for MySQL's and MariaDB's
``max_allowed_packet`` (MariaDB's default: 16 MiB) is recorded there with
visible markers where text was left out; elsewhere whole.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from anvia_django.core import AgentBuilder
from anvia_django.core.memory import InProcessMemoryStore, MemoryContext, MemoryErrorInput
from anvia_django.core.memory.bounded_records import LEFT_OUT_ROLE
from anvia_django.core.memory.errors import error_type_name
from anvia_django.models import FailedRun
from anvia_django.persistence.dialects import MySQLDialect
from anvia_django.store import DjangoMemoryStore
from tests.core.doubles import ScriptedModel
from tests.helpers import run, user

from .report import record

MAX_RECORD_BYTES = MySQLDialect.record_limit.bytes or 0
STORE = DjangoMemoryStore()
MiB = 1024 * 1024


class RaisingStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ is broken")


class RaisingRepr(Exception):
    def __repr__(self) -> str:
        raise RuntimeError("__repr__ is broken")

    __str__ = __repr__


class Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class UnreadableNotes(list[str]):
    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("no notes")


def unformattable_traceback() -> BaseException:
    """An exception whose traceback cannot be formatted: its notes cannot be read."""
    error = ValueError("notes")
    error.__notes__ = UnreadableNotes(["a note"])
    return error


def cyclic_cause() -> BaseException:
    first, second = ValueError("first"), KeyError("second")
    first.__cause__, second.__cause__ = second, first
    return first


def cyclic_context() -> BaseException:
    error = ValueError("itself")
    error.__context__ = error
    return error


UNPRINTABLE: dict[str, Callable[[], BaseException]] = {
    "raising __str__": RaisingStr,
    "raising __repr__": RaisingRepr,
    "an argument whose repr raises": lambda: ValueError(Unprintable()),
    "unformattable traceback": unformattable_traceback,
    "cyclic cause": cyclic_cause,
    "cyclic context": cyclic_context,
}


def raised(make: Callable[[], BaseException]) -> BaseException:
    """The exception, with a traceback."""
    try:
        raise make()
    except BaseException as error:
        return error


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", list(UNPRINTABLE))
def test_an_unprintable_exception_is_recorded(kind: str) -> None:
    error = raised(UNPRINTABLE[kind])
    context = MemoryContext(f"unprintable-{kind}")
    run(STORE.record_error, MemoryErrorInput(context, "run-1", error, [user("hi")]))
    (failed,) = FailedRun.objects.filter(conversation__session_id=context.session_id)
    assert failed.error_type == error_type_name(error)
    assert failed.messages == [user("hi")]
    assert failed.error_message
    assert failed.traceback
    if kind in ("raising __str__", "raising __repr__", "an argument whose repr raises"):
        assert failed.error_message == "<the error's message could not be formatted: RuntimeError>"
    if kind == "unformattable traceback":
        assert failed.traceback == "<the traceback could not be formatted: RuntimeError>"
    record("unprintable errors", recorded=1)


@pytest.mark.parametrize("kind", list(UNPRINTABLE))
def test_the_in_process_store_records_an_unprintable_exception(kind: str) -> None:
    store = InProcessMemoryStore()
    context = MemoryContext("s")
    error = raised(UNPRINTABLE[kind])
    asyncio.run(store.record_error(MemoryErrorInput(context, "run-1", error, [])))
    (failed,) = store.failed_runs("s")
    assert failed.error_type == error_type_name(error)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", list(UNPRINTABLE))
def test_an_agent_raises_its_own_unprintable_error(kind: str) -> None:
    error = UNPRINTABLE[kind]()
    agent = AgentBuilder("support", ScriptedModel([error])).memory(STORE).build()

    async def send() -> BaseException | None:
        # Caught in the task: asyncio itself formats a task's uncaught
        # exception (with its repr) on the way out of asyncio.run.
        try:
            await agent.session(f"agent-{kind}").prompt("Hi").send()
        except BaseException as raised:
            return raised
        return None

    assert asyncio.run(send()) is error  # the original, not a formatting error
    assert FailedRun.objects.filter(conversation__session_id=f"agent-{kind}").count() == 1


def admin_shows(failed: FailedRun, *texts: str) -> None:
    staff = User.objects.create_superuser(f"admin-{failed.pk}", password="pw")
    client = Client()
    client.force_login(staff)
    page = client.get(f"/admin/anvia_django/failedrun/{failed.pk}/change/")
    assert page.status_code == 200
    body = page.content.decode()
    for text in texts:
        assert text in body


@pytest.mark.django_db(transaction=True)
def test_a_16_mib_error_text_is_recorded() -> None:
    text = "é" * (8 * MiB)  # 16 MiB of UTF-8
    error = raised(lambda: RuntimeError(text))
    context = MemoryContext("big-error")
    run(STORE.record_error, MemoryErrorInput(context, "run-1", error, [user("hi")]))
    failed = FailedRun.objects.get(conversation__session_id="big-error")
    assert failed.messages == [user("hi")]
    if connection.vendor == "mysql":
        marker = f"of the {16 * MiB} bytes of this text here"
        assert marker in failed.error_message
        assert failed.error_message.startswith("éé")
        assert failed.error_message.endswith("éé")
        assert len(failed.error_message.encode()) <= MAX_RECORD_BYTES // 4
        assert "RuntimeError: éé" in failed.traceback
        admin_shows(failed, marker, "RuntimeError")
    else:
        assert failed.error_message == text
    record("big failed runs", recorded=1)


@pytest.mark.django_db(transaction=True)
def test_16_mib_of_partial_messages_are_recorded() -> None:
    messages = [user(f"{n}" + "x" * (4 * MiB)) for n in range(4)]
    context = MemoryContext("big-messages")
    error = raised(lambda: TimeoutError("slow"))
    run(STORE.record_error, MemoryErrorInput(context, "run-1", error, messages))
    failed = FailedRun.objects.get(conversation__session_id="big-messages")
    assert failed.error_message == "slow"
    if connection.vendor == "mysql":
        *kept, marker = failed.messages
        assert kept == messages[: len(kept)]
        assert marker["role"] == LEFT_OUT_ROLE
        assert marker["left_out_messages"] == len(messages) - len(kept)
        assert marker["left_out_bytes"] == sum(
            len(json.dumps(m, separators=(",", ":"))) for m in messages[len(kept) :]
        )
        admin_shows(failed, "left out the last 4 partial messages", "TimeoutError")
    else:
        assert failed.messages == messages
    record("big failed runs", recorded=1)


@pytest.mark.django_db(transaction=True)
def test_a_record_under_the_bound_is_kept_whole() -> None:
    messages = [user("x" * MiB), user("y" * MiB)]
    error = raised(lambda: RuntimeError("z" * (MiB // 2)))
    run(STORE.record_error, MemoryErrorInput(MemoryContext("whole"), "run-1", error, messages))
    failed = FailedRun.objects.get(conversation__session_id="whole")
    assert failed.messages == messages
    assert failed.error_message == "z" * (MiB // 2)
