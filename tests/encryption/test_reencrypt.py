"""``anvia_memory rotate-keys --reencrypt`` (issue 29, item 3): new data keys
for owners whose keys were made under an earlier master key, every message
sealed again, the old keys destroyed; resumable, and safe beside appends."""

from __future__ import annotations

import json
import multiprocessing
import threading
import time
from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, connections
from django.test import override_settings

from anvia_django.core.memory import MemoryContext
from anvia_django.core.memory.branches import MemoryForkInput
from anvia_django.encryption.envelope import ENVELOPE_PREFIX, envelope_head
from anvia_django.encryption.keyring import MissingKeyError
from anvia_django.encryption.keys import data_key_for, forget_keys, owner_of
from anvia_django.fields import EncodedJSON
from anvia_django.models import Conversation, DataKey, MemoryMessage
from anvia_django.persistence import append_messages, fork_conversation, load_messages
from anvia_django.persistence.codec import reencrypt as reencrypt_module
from anvia_django.persistence.codec import sealed
from anvia_django.persistence.dialects import Dialect, dialect_for
from tests.encryption import reencrypt_workers
from tests.encryption.support import KEY_1, KEY_2, encryption
from tests.helpers import append_input, assistant, user

OLD = encryption("k1", k1=KEY_1)
BOTH = encryption("k2", k1=KEY_1, k2=KEY_2)
"""k2 made current, k1 still there to read what is under it."""
NEW = encryption("k2", k2=KEY_2)
"""k1 removed from the keyring, as after a leak."""

# Tests that run the whole command use transaction=True: on MariaDB its wait
# for the writes in flight (LOCK TABLES) commits, so it runs outside any
# transaction, as the command always does.


def reencrypt(*args: str, verbosity: int = 0, **kwargs: Any) -> str:
    out = StringIO()
    call_command(
        "anvia_memory",
        "rotate-keys",
        "--reencrypt",
        *args,
        verbosity=verbosity,
        stdout=out,
        **kwargs,
    )
    return out.getvalue()


def column_texts() -> dict[int, tuple[int, int, str]]:
    """Every message row's (conversation id, position, column text), by pk: a dump."""
    return {
        pk: (conversation_id, position, json.dumps(message, separators=(",", ":")))
        for pk, conversation_id, position, message in MemoryMessage.objects.values_list(
            "pk", "conversation_id", "position", "message"
        )
    }


def current_keys() -> dict[str, int]:
    """Each owner's current data key id, checking it is the only one and
    made under k2."""
    keys = list(DataKey.objects.values_list("owner", "pk", "created_under", "master_key_id"))
    assert len({owner for owner, *_ in keys}) == len(keys), "an owner kept an old key"
    assert {(made, wrapper) for _, _, made, wrapper in keys} <= {("k2", "k2")}
    return {owner: pk for owner, pk, *_ in keys}


def assert_all_sealed_under_current_keys() -> None:
    """Every message row is an envelope under its conversation owner's current key."""
    keys = current_keys()
    owners = {
        pk: owner_of(user_id, ref)
        for pk, user_id, ref in Conversation.objects.values_list("pk", "user_id", "ref")
    }
    for conversation_id, position, text in column_texts().values():
        head = envelope_head(keys[owners[conversation_id]])
        assert text.startswith(head), f"position {position} of conversation {conversation_id}"


def write_back(dump: dict[int, tuple[int, int, str]]) -> None:
    """Put the dumped column texts back into the rows they came from."""
    for pk, (_, _, text) in dump.items():
        MemoryMessage.objects.filter(pk=pk).update(message=EncodedJSON(text))


@pytest.fixture
def before_a_leak() -> dict[str, list[Any]]:
    """Sessions of two users (one with two sessions), one without a user and
    a fork, all sealed under keys made under k1; what each loads."""
    with override_settings(ANVIA_DJANGO=OLD):
        append_messages(append_input("a", [user("a1"), assistant("a2")], user_id="u1"))
        append_messages(append_input("a", [user("a3")], run_id="r2", user_id="u1"))
        append_messages(append_input("b", [user("b1")], user_id="u1"))
        append_messages(append_input("c", [user("c1"), assistant("c2")], user_id="u2"))
        append_messages(append_input("d", [user("d1")]))
        fork_conversation(
            MemoryForkInput(MemoryContext("a", user_id="u1"), session_id="a-fork", position=2)
        )
        contexts = {
            "a": MemoryContext("a", user_id="u1"),
            "b": MemoryContext("b", user_id="u1"),
            "a-fork": MemoryContext("a-fork", user_id="u1"),
            "c": MemoryContext("c", user_id="u2"),
            "d": MemoryContext("d"),
        }
        loaded = {name: load_messages(context) for name, context in contexts.items()}
    return loaded


def load_all(expected: dict[str, list[Any]]) -> dict[str, list[Any]]:
    users = {"a": "u1", "b": "u1", "a-fork": "u1", "c": "u2"}
    return {name: load_messages(MemoryContext(name, user_id=users.get(name))) for name in expected}


@pytest.mark.django_db(transaction=True)
def test_every_message_moves_to_a_new_key_and_the_old_keys_are_destroyed(
    before_a_leak: dict[str, list[Any]],
) -> None:
    old_keys = set(DataKey.objects.values_list("pk", flat=True))
    assert len(old_keys) == 3  # u1, u2 and the conversation without a user
    dump = column_texts()
    with override_settings(ANVIA_DJANGO=BOTH):
        output = reencrypt("--batch-size", "2")
    assert "3 data key(s) renewed, 9 row(s) of 5 conversation(s) sealed again" in output
    assert "3 old data key(s) destroyed" in output
    assert not DataKey.objects.filter(pk__in=old_keys).exists()
    assert_all_sealed_under_current_keys()
    # Every row was written again; nothing else about it changed.
    after = column_texts()
    assert after.keys() == dump.keys()
    assert all(after[pk][:2] == dump[pk][:2] and after[pk][2] != dump[pk][2] for pk in dump)
    forget_keys()  # a process that never saw k1 or the old data keys
    with override_settings(ANVIA_DJANGO=NEW):
        assert load_all(before_a_leak) == before_a_leak
        # The dump taken before no longer opens: its data keys are gone.
        write_back(dump)
        with pytest.raises(MissingKeyError, match=r"data key \d+ does not exist") as failed:
            load_messages(MemoryContext("a", user_id="u1"))
        assert "a1" not in str(failed.value)


@pytest.mark.django_db(transaction=True)
def test_running_it_again_changes_nothing(before_a_leak: dict[str, list[Any]]) -> None:
    with override_settings(ANVIA_DJANGO=BOTH):
        reencrypt()
        keys = current_keys()
        dump = column_texts()
        output = reencrypt()
    assert "0 data key(s) renewed, 0 row(s) of 5 conversation(s) sealed again" in output
    assert "0 old data key(s) destroyed" in output
    assert current_keys() == keys
    assert column_texts() == dump


@pytest.mark.django_db(transaction=True)
def test_rows_written_before_encryption_are_sealed() -> None:
    with override_settings(ANVIA_DJANGO={"ENCRYPTION": None}):
        append_messages(append_input("plain", [user("p1"), assistant("p2")], user_id="u1"))
    with override_settings(ANVIA_DJANGO=OLD):
        append_messages(append_input("plain", [user("sealed")], run_id="r2", user_id="u1"))
        assert not column_texts()[min(column_texts())][2].startswith(ENVELOPE_PREFIX)
        # k1 is CURRENT: no key is renewed, the plain rows are sealed.
        output = reencrypt()
        assert "0 data key(s) renewed, 2 row(s) of 1 conversation(s) sealed again" in output
        (key,) = DataKey.objects.values_list("pk", flat=True)
        assert all(text.startswith(envelope_head(key)) for *_, text in column_texts().values())
        assert load_messages(MemoryContext("plain", user_id="u1")) == [
            user("p1"),
            assistant("p2"),
            user("sealed"),
        ]


@pytest.mark.django_db
def test_needs_encryption() -> None:
    with (
        override_settings(ANVIA_DJANGO={"ENCRYPTION": None}),
        pytest.raises(CommandError, match="ENCRYPTION"),
    ):
        reencrypt()


@pytest.mark.django_db(transaction=True)
def test_progress_per_batch_on_stderr_and_quiet_at_verbosity_0(
    before_a_leak: dict[str, list[Any]],
) -> None:
    with override_settings(ANVIA_DJANGO=BOTH):
        quiet = StringIO()
        reencrypt("--batch-size", "2", stderr=quiet)
        assert quiet.getvalue() == ""
        with override_settings(ANVIA_DJANGO=encryption("k3", k2=KEY_2, k3=KEY_1)):
            shown = StringIO()
            reencrypt("--batch-size", "2", verbosity=1, stderr=shown)
    lines = shown.getvalue().splitlines()
    assert lines == [
        "reencrypt: 3 data key(s) renewed",
        "reencrypt: 2/5 conversation(s) swept, 4/9 message(s) sealed again",
        "reencrypt: 4/5 conversation(s) swept, 7/9 message(s) sealed again",
        "reencrypt: 5/5 conversation(s) swept, 9/9 message(s) sealed again",
        "reencrypt: 2 old data key(s) destroyed",
        "reencrypt: 3 old data key(s) destroyed",
    ]


@pytest.mark.django_db
def test_erase_destroys_every_generation_of_the_users_key(
    before_a_leak: dict[str, list[Any]],
) -> None:
    with override_settings(ANVIA_DJANGO=BOTH):
        reencrypt_module.renew_keys("default", batch_size=10)  # a run stopped after phase 1
        assert DataKey.objects.filter(owner="user:u1").count() == 2
        call_command("anvia_memory", "erase", "--user", "u1", "--yes", verbosity=0)
        assert not DataKey.objects.filter(owner="user:u1").exists()
        assert load_messages(MemoryContext("c", user_id="u2")) == before_a_leak["c"]


@pytest.mark.django_db(transaction=True)
def test_a_fault_in_a_batch_keeps_the_batches_before_it_and_a_rerun_finishes(
    before_a_leak: dict[str, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = 0

    def step_then_fail(alias: str, conversation_id: int, key: Any, limit: int) -> int:
        nonlocal calls
        done = reencrypt_module.reseal_messages(alias, conversation_id, key, limit)
        calls += 1
        if calls == 5:  # conversation a's three rows, its empty fourth batch, then b
            raise MissingKeyError("data key 0: injected")
        return done

    with override_settings(ANVIA_DJANGO=BOTH):
        dump = column_texts()
        monkeypatch.setattr(reencrypt_module, "SEALED_TABLES", (step_then_fail,))
        with pytest.raises(CommandError, match=r"data key 0: injected.*run the command again"):
            reencrypt("--batch-size", "1")
        # Three batches of one row committed, the one that failed rolled back.
        changed = [pk for pk, row in column_texts().items() if row != dump[pk]]
        assert len(changed) == 3
        assert DataKey.objects.count() == 6  # the old keys are still there
        assert load_all(before_a_leak) == before_a_leak  # under two keys, all readable
        monkeypatch.undo()
        output = reencrypt("--batch-size", "1")
        assert "6 row(s) of 5 conversation(s) sealed again, 3 old data key(s)" in output
    assert_all_sealed_under_current_keys()
    with override_settings(ANVIA_DJANGO=NEW):
        assert load_all(before_a_leak) == before_a_leak


@pytest.mark.django_db(transaction=True)
def test_killed_mid_batch_then_run_again_loses_nothing(
    before_a_leak: dict[str, list[Any]],
) -> None:
    dump = column_texts()
    context = multiprocessing.get_context("spawn")
    paused = context.Event()
    database_name = connection.settings_dict["NAME"]
    connections.close_all()
    child = context.Process(
        target=reencrypt_workers.reencrypt_until_paused, args=(database_name, BOTH, paused, 5)
    )
    child.start()
    try:
        assert paused.wait(120), "the re-encryption never reached its fifth batch"
    finally:
        # SIGKILL, in the fifth batch's transaction: conversation b's row
        # sealed again, not committed.
        child.kill()
        child.join()
    assert child.exitcode == -9
    changed = [pk for pk, row in column_texts().items() if row != dump[pk]]
    assert len(changed) == 3  # conversation a's rows; b's was never committed
    with override_settings(ANVIA_DJANGO=BOTH):
        assert DataKey.objects.count() == 6
        assert load_all(before_a_leak) == before_a_leak
        output = reencrypt("--batch-size", "1")
        assert "0 data key(s) renewed, 6 row(s) of 5 conversation(s)" in output
    assert_all_sealed_under_current_keys()
    forget_keys()
    with override_settings(ANVIA_DJANGO=NEW):
        assert load_all(before_a_leak) == before_a_leak


def _append_in_thread(session_id: str, text: str, errors: list[BaseException]) -> threading.Thread:
    def run() -> None:
        try:
            append_messages(append_input(session_id, [user(text)], run_id="late", user_id="u1"))
        except BaseException as error:  # pragma: no cover - reported by the test
            errors.append(error)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _hold_first_key_fetch(
    monkeypatch: pytest.MonkeyPatch, used: list[int]
) -> tuple[threading.Event, threading.Event]:
    """Make the next append hold on after fetching its data key (under its
    conversation's lock) until ``go`` is set; ``fetched`` tells it got there."""
    fetched, go = threading.Event(), threading.Event()
    real_fetch = data_key_for

    def fetch_then_hold(alias: str, owner: str) -> Any:
        key = real_fetch(alias, owner)
        used.append(key[0])
        fetched.set()
        assert go.wait(60)
        return key

    monkeypatch.setattr(sealed, "data_key_for", fetch_then_hold)
    return fetched, go


def _check_late_message(session_id: str, expected_before: list[Any], old_key: int) -> None:
    assert not DataKey.objects.filter(pk=old_key).exists()
    assert_all_sealed_under_current_keys()
    forget_keys()
    with override_settings(ANVIA_DJANGO=NEW):
        loaded = load_messages(MemoryContext(session_id, user_id="u1"))
        assert loaded == [*expected_before, user("late")]


@pytest.mark.server  # on SQLite the writer's key fetch and insert are one write transaction
@pytest.mark.django_db(transaction=True)
def test_a_writer_holding_the_retired_key_under_the_lock_loses_nothing(
    before_a_leak: dict[str, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer fetches u1's old key under conversation a's lock and holds
    on while the re-encryption makes u1 a new key; it then seals and inserts
    under the old key, while the sweep waits for the lock."""
    (old_key,) = DataKey.objects.filter(owner="user:u1").values_list("pk", flat=True)
    used: list[int] = []
    fetched, go = _hold_first_key_fetch(monkeypatch, used)
    real_renew = reencrypt_module.renew_keys

    def renew_then_release(alias: str, *, batch_size: int) -> int:
        renewed = real_renew(alias, batch_size=batch_size)
        go.set()
        return renewed

    real_retire = reencrypt_module.retire_keys
    resealed_by_the_last_sweep: list[int] = []

    def retire(alias: str, counts: Any, **options: Any) -> None:
        before = counts.resealed_rows
        real_retire(alias, counts, **options)
        resealed_by_the_last_sweep.append(counts.resealed_rows - before)

    monkeypatch.setattr(reencrypt_module, "renew_keys", renew_then_release)
    monkeypatch.setattr(reencrypt_module, "retire_keys", retire)
    errors: list[BaseException] = []
    with override_settings(ANVIA_DJANGO=BOTH):
        writer = _append_in_thread("a", "late", errors)
        assert fetched.wait(60)
        reencrypt()
        writer.join(60)
    assert errors == []
    assert used == [old_key]  # the writer did seal under the key being retired
    # The sweep under the lock sealed its message again, not the last one.
    assert resealed_by_the_last_sweep == [0]
    _check_late_message("a", before_a_leak["a"], old_key)


def _someone_waits_for_the_conversation_table(alias: str) -> bool:
    """Whether a session of this database waits for a lock on the
    conversation table (the wait for the writes in flight)."""
    connection = connections[alias]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted "
                "AND locktype = 'relation' AND relation = %s::regclass "
                "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))",
                [Conversation._meta.db_table],
            )
        else:
            cursor.execute(
                "SELECT EXISTS (SELECT 1 FROM information_schema.PROCESSLIST "
                "WHERE DB = DATABASE() AND STATE = 'Waiting for table metadata lock')"
            )
        return bool(cursor.fetchone()[0])


@pytest.mark.server  # on SQLite the writer's key fetch and insert are one write transaction
@pytest.mark.django_db(transaction=True)
def test_a_writer_creating_a_conversation_with_the_retired_key_loses_nothing(
    before_a_leak: dict[str, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer creates conversation "new" of u1 and fetches u1's old key;
    no sweep can see the conversation before it commits. It goes on only
    when the re-encryption is about to destroy the old key, and commits
    only once the re-encryption waits for it (or, were the wait missing,
    once it has finished: then the message would be lost)."""
    (old_key,) = DataKey.objects.filter(owner="user:u1").values_list("pk", flat=True)
    used: list[int] = []
    fetched, go = _hold_first_key_fetch(monkeypatch, used)
    finished = threading.Event()
    dialect = type(dialect_for("default"))
    real_wait = dialect.wait_for_writes_in_flight
    real_append = dialect.append_under_lock

    def release_then_wait(self: Dialect, alias: str) -> None:
        go.set()
        real_wait(self, alias)

    def append_then_hold(self: Dialect, alias: str, append: Any, codec: Any) -> Any:
        appended = real_append(self, alias, append, codec)
        while not (finished.is_set() or _someone_waits_for_the_conversation_table(alias)):
            time.sleep(0.01)
        return appended

    monkeypatch.setattr(dialect, "wait_for_writes_in_flight", release_then_wait)
    monkeypatch.setattr(dialect, "append_under_lock", append_then_hold)
    errors: list[BaseException] = []
    with override_settings(ANVIA_DJANGO=BOTH):
        writer = _append_in_thread("new", "late", errors)
        assert fetched.wait(60)
        try:
            reencrypt()
        finally:
            finished.set()
        writer.join(60)
    assert errors == []
    assert used == [old_key]
    _check_late_message("new", [], old_key)


@pytest.mark.django_db(transaction=True)
def test_reencrypt_while_8_writers_append_loses_nothing(processes: bool) -> None:
    with override_settings(ANVIA_DJANGO=OLD):  # every user's key made under k1
        for number in range(reencrypt_workers.USERS):
            append_messages(append_input(f"seed-{number}", [user("seed")], user_id=f"u{number}"))
    least = 10
    with override_settings(ANVIA_DJANGO=BOTH):
        appended = _with_writer_processes(least) if processes else _with_writer_threads(least)
    assert all(count >= least for count in appended)
    assert_all_sealed_under_current_keys()
    forget_keys()
    with override_settings(ANVIA_DJANGO=NEW):
        for number, count in enumerate(appended):
            sessions: dict[tuple[str, str], list[Any]] = {}
            for index in range(count):
                place = reencrypt_workers.writer_session(number, index)
                sessions.setdefault(place, []).append(user(f"{number}:{index}"))
            for (session_id, user_id), expected in sessions.items():
                # load_messages returns them in position order; the stored
                # positions are checked gap-free too.
                assert load_messages(MemoryContext(session_id, user_id=user_id)) == expected
                positions = list(
                    MemoryMessage.objects.filter(conversation__session_id=session_id)
                    .order_by("position")
                    .values_list("position", flat=True)
                )
                assert positions == list(range(len(expected)))


def _reencrypt_once_writing(stop: Any, writers_failed: Callable[[], bool]) -> None:
    """Start once the writers are writing, stop them once it has finished:
    every step of it runs beside appends."""
    while MemoryMessage.objects.count() < reencrypt_workers.USERS + reencrypt_workers.WRITERS:
        if writers_failed():
            stop.set()
            return  # their errors are reported by the caller
        time.sleep(0.01)
    try:
        reencrypt("--batch-size", "3")
    finally:
        stop.set()


def _with_writer_processes(least: int) -> list[int]:
    context = multiprocessing.get_context("spawn")
    database_name = connection.settings_dict["NAME"]
    connections.close_all()
    with context.Manager() as manager, context.Pool(reencrypt_workers.WRITERS) as pool:
        stop = manager.Event()
        pending = [
            pool.apply_async(
                reencrypt_workers.append_until_stopped, (database_name, BOTH, number, stop, least)
            )
            for number in range(reencrypt_workers.WRITERS)
        ]
        _reencrypt_once_writing(stop, lambda: any(result.ready() for result in pending))
        return [result.get(timeout=600) for result in pending]


def _with_writer_threads(least: int) -> list[int]:
    stop = threading.Event()
    results = [0] * reencrypt_workers.WRITERS
    errors: list[BaseException] = []

    def work(number: int) -> None:
        try:
            results[number] = reencrypt_workers.append_until_stopped(
                None, BOTH, number, stop, least
            )
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(reencrypt_workers.WRITERS)]
    for thread in threads:
        thread.start()
    _reencrypt_once_writing(stop, lambda: bool(errors))
    for thread in threads:
        thread.join(600)
    assert errors == []
    return results


class KeysOnOther:
    """The data key table on "other", every other table of the app on "default"."""

    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        return "other" if model._meta.model_name == "datakey" else None

    db_for_write = db_for_read

    def allow_migrate(self, db: str, app_label: str, model_name: Any = None, **hints: Any) -> Any:
        if app_label != "anvia_django":
            return None
        return db == ("other" if model_name == "datakey" else "default")


def keys_on_other(current: str, **keys: str) -> dict[str, Any]:
    setting = encryption(current, **keys)
    setting["ENCRYPTION"]["KEY_DATABASE"] = "other"
    return setting


@pytest.mark.django_db(transaction=True, databases=["default", "other"])
def test_a_key_table_other_message_databases_may_share_is_refused() -> None:
    # Without a router every alias may hold messages: their rows would stay
    # under keys the run retires (it sweeps one database).
    with override_settings(ANVIA_DJANGO=keys_on_other("k1", k1=KEY_1)):
        append_messages(append_input("a", [user("a1")], user_id="u1"))
    with (
        override_settings(ANVIA_DJANGO=keys_on_other("k2", k1=KEY_1, k2=KEY_2)),
        pytest.raises(CommandError, match=r"as well as 'default', and re-encryption sweeps"),
    ):
        reencrypt()
    assert DataKey.objects.using("other").count() == 1  # nothing renewed or destroyed


@pytest.mark.django_db(transaction=True, databases=["default", "other"])
@override_settings(DATABASE_ROUTERS=[f"{__name__}.KeysOnOther"])
def test_keys_on_their_own_database() -> None:
    with override_settings(ANVIA_DJANGO=keys_on_other("k1", k1=KEY_1)):
        append_messages(append_input("a", [user("a1")], user_id="u1"))
        append_messages(append_input("d", [user("d1")]))
    (old_key,) = DataKey.objects.using("other").filter(owner="user:u1").values_list("pk", flat=True)
    with override_settings(ANVIA_DJANGO=keys_on_other("k2", k1=KEY_1, k2=KEY_2)):
        output = reencrypt()
    assert "2 data key(s) renewed, 2 row(s) of 2 conversation(s) sealed again" in output
    assert "2 old data key(s) destroyed" in output
    assert not DataKey.objects.using("default").exists()  # nothing on the messages' database
    keys = dict(DataKey.objects.using("other").values_list("owner", "pk"))
    assert len(keys) == 2
    assert keys["user:u1"] != old_key
    assert column_texts()[min(column_texts())][2].startswith(envelope_head(keys["user:u1"]))
    forget_keys()
    with override_settings(ANVIA_DJANGO=keys_on_other("k2", k2=KEY_2)):
        assert load_messages(MemoryContext("a", user_id="u1")) == [user("a1")]
        assert load_messages(MemoryContext("d")) == [user("d1")]


@pytest.mark.parametrize("rows", [1, 4])
@pytest.mark.django_db
def test_a_batch_is_seven_statements_whatever_its_size(
    rows: int, django_assert_num_queries: Any
) -> None:
    with override_settings(ANVIA_DJANGO={"ENCRYPTION": None}):
        append_messages(append_input("s", [user(str(n)) for n in range(rows)], user_id="u1"))
    (conversation_id,) = Conversation.objects.values_list("pk", flat=True)
    with override_settings(ANVIA_DJANGO=OLD):
        append_messages(append_input("other", [user("key")], user_id="u1"))  # u1's key exists
        # The lock, the owner's key, the messages not under it, their UPDATE
        # (one statement run for each row), the failed runs and the
        # summaries not under it, the ADK session (none here); inside the
        # test's transaction the batch's own is a savepoint and its release.
        with django_assert_num_queries(7 + 2):
            assert (
                reencrypt_module.reseal_conversation("default", conversation_id, batch_size=5)
                == rows
            )
