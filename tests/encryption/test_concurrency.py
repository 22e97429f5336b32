"""Writers racing to create one user's data key, and to append to one session."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from django.core.management import call_command
from django.db import connections
from django.test import override_settings

from anvia_django.core.memory import MemoryContext
from anvia_django.models import DataKey
from anvia_django.persistence import append_messages, load_messages
from tests.encryption.support import KEY_1, KEY_2, encryption
from tests.helpers import append_input, user

WRITERS = 8
APPENDS = 5


@pytest.fixture
def encrypted() -> Iterator[None]:
    with override_settings(ANVIA_DJANGO=encryption()):
        yield


@pytest.mark.django_db(transaction=True)
def test_racing_first_appends_share_one_data_key_and_lose_nothing(encrypted: None) -> None:
    start = threading.Barrier(WRITERS)
    errors: list[BaseException] = []

    def writer(number: int) -> None:
        try:
            start.wait(10)
            for i in range(APPENDS):
                # Half on one shared session, half on sessions of their own:
                # all of one user, whose key none of them has yet.
                session = "shared" if number % 2 else f"own-{number}"
                append_messages(
                    append_input(
                        session, [user(f"{number}-{i}")], run_id=f"w{number}-{i}", user_id="u1"
                    )
                )
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert list(DataKey.objects.values_list("owner", flat=True)) == ["user:u1"]
    shared = load_messages(MemoryContext("shared", user_id="u1"))
    assert sorted(m["content"] for m in shared) == sorted(
        f"{n}-{i}" for n in range(WRITERS) if n % 2 for i in range(APPENDS)
    )
    for n in range(0, WRITERS, 2):
        own = load_messages(MemoryContext(f"own-{n}", user_id="u1"))
        assert [m["content"] for m in own] == [f"{n}-{i}" for i in range(APPENDS)]


@pytest.mark.django_db(transaction=True)
def test_rotation_while_writers_append_loses_nothing() -> None:
    both = encryption("k1", k1=KEY_1, k2=KEY_2)
    rotated = encryption("k2", k1=KEY_1, k2=KEY_2)
    with override_settings(ANVIA_DJANGO=both):
        for n in range(WRITERS):  # every writer's key exists, under k1
            append_messages(append_input(f"s{n}", [user("first")], run_id="r0", user_id=f"u{n}"))
    start = threading.Barrier(WRITERS + 1)
    errors: list[BaseException] = []

    def writer(number: int) -> None:
        try:
            start.wait(10)
            for i in range(APPENDS):
                append_messages(
                    append_input(
                        f"s{number}",
                        [user(f"{number}-{i}")],
                        run_id=f"r{i + 1}",
                        user_id=f"u{number}",
                    )
                )
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)
        finally:
            connections.close_all()

    # CURRENT is k2 for the writers and the rotation alike (settings are
    # process-wide): writers keep using their k1-wrapped keys until rotated.
    with override_settings(ANVIA_DJANGO=rotated):
        threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
        for thread in threads:
            thread.start()
        start.wait(10)
        call_command("anvia_memory", "rotate-keys", "--batch-size", "2", verbosity=0)
        for thread in threads:
            thread.join(60)
        call_command("anvia_memory", "rotate-keys", verbosity=0)  # idempotent
    assert errors == []
    assert set(DataKey.objects.values_list("master_key_id", flat=True)) == {"k2"}
    with override_settings(ANVIA_DJANGO=encryption("k2", k2=KEY_2)):  # k1 retired
        for n in range(WRITERS):
            loaded = load_messages(MemoryContext(f"s{n}", user_id=f"u{n}"))
            assert [m["content"] for m in loaded] == ["first"] + [
                f"{n}-{i}" for i in range(APPENDS)
            ]
