"""W11 on sealed messages: content search through the blind index keyed per
owner, beside the one shared index key of earlier versions (issue 35).

    ANVIA_BENCH_DB=postgres python -m benchmarks.sealed_search [MESSAGES] [REPEATS]

Two databases (benchmarks/sealed_settings.py), filled alike with W11's
messages (``MESSAGES``, default 100,000, in conversations of 100, of 100
users; every fourth a tool call without text), sealed and indexed by the
encryption package's own functions (``data_key_for``, ``seal``,
``indexed``) in Python, in bulk, and written with COPY (PostgreSQL) or
``executemany`` (SQLite):

- ``default``, per owner: each message sealed under its user's data key,
  its tokens under that key's index key, as the store writes them now;
- ``shared``, one key: every message sealed under the data key of the
  owner ``blind-index``, the one index key of earlier versions. The store
  looks for that key's tokens in every search, so with no other key there
  each search computes one token per word, as those versions did.

Then ``search_messages`` (what the admin and the API call) for a rare word,
a word in 1% of the messages and a word in every text message, for one
user and staff-wide (no user: every owner's key, 100 of them), in both
databases, alternating which goes first; each pair's hits must be the same
messages. Medians of ``REPEATS`` (default 7) of the call's wall time (key
lookups, tokens, the query, opening the hits) and, on PostgreSQL, of the
server time of the queries it sent (planning + execution under
``EXPLAIN ANALYZE``). The ratio per owner / shared is within this run.
On PostgreSQL each row also counts the search's tokens that the text
parser splits in two (``split_tokens``): those make the match a phrase,
which the GIN index cannot answer alone (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import datetime
import os
import statistics
import sys
import time
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.sealed_settings")
django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connections, transaction  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from anvia_django.encryption.blind_index import INDEX_OWNER, indexed  # noqa: E402
from anvia_django.encryption.envelope import seal  # noqa: E402
from anvia_django.encryption.keys import data_key_for, owner_of  # noqa: E402
from anvia_django.models import Conversation, DataKey  # noqa: E402
from anvia_django.persistence import search_messages  # noqa: E402
from anvia_django.persistence.codec import SearchScope  # noqa: E402
from anvia_django.persistence.inspector.search import indexed_terms, validate_query  # noqa: E402

from .database import pg_conninfo, server_version  # noqa: E402
from .raw import MSG  # noqa: E402
from .search import PER_CONVERSATION, TOPICS, server_seconds  # noqa: E402

USERS = 100
PER_OWNER = "default"
SHARED = "shared"
ARMS = (SHARED, PER_OWNER)
COLUMNS = ("conversation_id", "position", "run_id", "turn", "role", "message", "created_at")
_TOOL_CALL = '{"role":"assistant","content":null,"tool_calls":[{"id":"c","name":"lookup"}]}'


def text_of(number: int) -> str:
    """W11's message of order ``number`` (JSON text), or its tool call."""
    if number % 4 == 1:
        return _TOOL_CALL
    return (
        '{"role":"user","content":"Could you check whether order '
        f'{number} has shipped? topic{number % TOPICS} and the tracking page"}}'
    )


def fresh_databases() -> None:
    """Drop and recreate both databases, and migrate them."""
    connections.close_all()
    if settings.BACKEND == "postgres":
        import psycopg

        with psycopg.connect(pg_conninfo(dbname="postgres"), autocommit=True) as admin:
            for alias in ARMS:
                name = settings.DATABASES[alias]["NAME"]
                admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
                admin.execute(f'CREATE DATABASE "{name}"')
    else:
        for alias in ARMS:
            name = settings.DATABASES[alias]["NAME"]
            for suffix in ("", "-wal", "-shm"):
                Path(name + suffix).unlink(missing_ok=True)
    for alias in ARMS:
        call_command("migrate", database=alias, verbosity=0, interactive=False)
    connections.close_all()


def fill(alias: str, messages: int, *, shared: bool) -> None:
    """``messages`` sealed messages in conversations of ``PER_CONVERSATION``
    of ``USERS`` users on ``alias``: indexed under their owner's key, or
    under the one shared key when ``shared``."""
    now = datetime.datetime.now(datetime.UTC)
    count = max(1, messages // PER_CONVERSATION)
    Conversation.objects.using(alias).bulk_create(
        (
            Conversation(
                ref=f"r{c:021d}",
                session_id=f"search-{c}",
                scope_key=f"user-{c % USERS}",
                user_id=f"user-{c % USERS}",
                created_at=now,
                updated_at=now - datetime.timedelta(seconds=c),
                message_count=PER_CONVERSATION,
            )
            for c in range(1, count + 1)
        ),
        batch_size=1000,
    )
    conversations = list(
        Conversation.objects.using(alias)
        .order_by("pk")
        .values_list("pk", "user_id", "ref", "scope_key")
    )
    owners = [
        INDEX_OWNER if shared else owner_of(user_id, ref, scope_key)
        for _, user_id, ref, scope_key in conversations
    ]
    # Made before the rows: no other query while COPY runs on the connection.
    keys = {owner: data_key_for(alias, owner) for owner in sorted(set(owners))}

    def rows() -> Iterator[tuple[Any, ...]]:
        for (conversation_id, *_), owner in zip(conversations, owners, strict=True):
            key_id, cipher = keys[owner]
            texts = [
                text_of(conversation_id * PER_CONVERSATION + p) for p in range(PER_CONVERSATION)
            ]
            envelopes = indexed(
                cipher,
                [seal(cipher, key_id, conversation_id, p, text) for p, text in enumerate(texts)],
                texts,
            )
            for p, envelope in enumerate(envelopes):
                role = "assistant" if p % 4 == 1 else "user"
                yield (conversation_id, p, f"run-{p // 4}", 1 + p // 4, role, envelope, now)

    connection = connections[alias]
    if connection.vendor == "postgresql":
        _copy_rows(alias, rows())
    else:
        sql = (
            f"INSERT INTO {MSG} ({', '.join(COLUMNS)}) VALUES ({', '.join(['%s'] * len(COLUMNS))})"
        )
        batches = rows()
        with transaction.atomic(using=alias), connection.cursor() as cursor:
            while batch := list(islice(batches, 10_000)):
                cursor.executemany(sql, batch)
        if connection.vendor == "sqlite":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")


def _copy_rows(alias: str, rows: Iterator[tuple[Any, ...]]) -> None:
    """COPY ``rows`` into the messages table, its full-text index dropped
    before and built again after (one build instead of 10^6 insertions);
    inside a transaction (a test's) the index stays and nothing is vacuumed."""
    connection = connections[alias]
    rebuild = not connection.in_atomic_block
    with connection.cursor() as cursor:
        full_text = []
        if rebuild:
            cursor.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s"
                " AND indexdef LIKE %s",
                [MSG, "%to_tsvector%"],
            )
            full_text = cursor.fetchall()
        for name, _ in full_text:
            cursor.execute(f'DROP INDEX "{name}"')
        with cursor.cursor.copy(f"COPY {MSG} ({', '.join(COLUMNS)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        if rebuild:
            cursor.execute("SET maintenance_work_mem = '256MB'")
            for _, definition in full_text:
                cursor.execute(definition)
            cursor.execute(f"VACUUM ANALYZE {MSG}")
            cursor.execute("VACUUM ANALYZE anvia_django_conversation")


Search = tuple[str, str, str | None]
"""What is searched, the word, the user whose messages are searched (``None``: staff-wide)."""


def searches() -> list[Search]:
    """One user's searches and the same words staff-wide (both databases
    have the same conversations and ids: checked by the hits)."""
    conversations = list(
        Conversation.objects.using(PER_OWNER).order_by("pk").values_list("pk", "user_id")
    )
    middle, user = conversations[len(conversations) // 2]
    owners = DataKey.objects.using(PER_OWNER).count()
    # The order number of one text message (position 2) of a middle conversation.
    rare = str(middle * PER_CONVERSATION + 2)
    words = {
        "a rare word (1 message)": rare,
        "a word in 1% of messages": "topic7",
        "a word in every text message": "shipped",
    }
    return [
        *((f"one user's, {what}", word, user) for what, word in words.items()),
        *((f"staff-wide ({owners} owners), {what}", word, None) for what, word in words.items()),
    ]


def timed(alias: str, word: str, user_id: str | None) -> tuple[float, float | None]:
    """The wall time of one search on ``alias`` and, on PostgreSQL, the
    server's planning + execution time of every query it sent (run again
    under ``EXPLAIN ANALYZE``: the key lookups and the match)."""
    connection = connections[alias]
    with CaptureQueriesContext(connection) as captured:
        started = time.perf_counter()
        search_messages(word, limit=50, user_id=user_id, using=alias)
        wall = time.perf_counter() - started
    if connection.vendor != "postgresql":
        return wall, None
    return wall, server_seconds(connection, captured.captured_queries)


def split_tokens(alias: str, word: str, user_id: str | None) -> str:
    """PostgreSQL: how many of the search's tokens its text parser reads as
    two words (hex such as ``1e43d5...`` begins like a number in scientific
    notation), making the match a phrase that GIN cannot answer alone: every
    candidate row is read and its text parsed again."""
    connection = connections[alias]
    if connection.vendor != "postgresql":
        return ""
    terms = indexed_terms(alias, validate_query(word), SearchScope(user_id=user_id))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FILTER (WHERE numnode(to_tsquery('simple'::regconfig, t)) > 1),"
            " count(*) FROM unnest(%s::text[]) AS t",
            [list(terms.words)],
        )
        split, total = cursor.fetchone()
    return f"{split}/{total}"


Measured = tuple[str, int, dict[str, list[float]], dict[str, str]]


def measure(repeats: int) -> list[Measured]:
    """For each search: its hits, each arm's times (``<arm>`` wall,
    ``<arm> server`` on PostgreSQL), arms alternating which goes first, and
    each arm's split tokens."""
    measured = []
    for what, word, user_id in searches():
        hits = {  # warm: keys unwrapped, plans, caches
            alias: [
                hit.message_id
                for hit in search_messages(word, limit=50, user_id=user_id, using=alias).items
            ]
            for alias in ARMS
        }
        if hits[SHARED] != hits[PER_OWNER]:
            raise AssertionError(f"{what}: the two indexes found different messages")
        times: dict[str, list[float]] = {}
        for repeat in range(repeats):
            for alias in ARMS if repeat % 2 == 0 else ARMS[::-1]:
                wall, server = timed(alias, word, user_id)
                times.setdefault(alias, []).append(wall)
                if server is not None:
                    times.setdefault(f"{alias} server", []).append(server)
        split = {alias: split_tokens(alias, word, user_id) for alias in ARMS}
        measured.append((what, len(hits[SHARED]), times, split))
        print(f"   {what}: done", flush=True)
    return measured


def load_average() -> str:
    """The machine's load average (1, 5, 15 minutes)."""
    try:
        with open("/proc/loadavg") as loadavg:
            return " ".join(loadavg.read().split()[:3])
    except OSError:
        return "unknown"


def report(messages: int, repeats: int, measured: list[Measured], loads: list[str]) -> None:
    server = settings.BACKEND == "postgres"
    print()
    print(
        f"{server_version()}, {messages:,} messages of {USERS} users, medians of {repeats} "
        f"(load average {loads[0]} before, {loads[1]} after), ms"
    )
    print()
    head = "| search | hits | one shared key | per owner | per owner / shared |"
    rule = "|---|---:|---:|---:|---:|"
    if server:
        head += " server: shared | server: per owner | server ratio | split tokens |"
        rule += "---:|---:|---:|---|"
    print(head)
    print(rule)
    for what, hits, times, split in measured:
        shared, own = statistics.median(times[SHARED]), statistics.median(times[PER_OWNER])
        line = f"| {what} | {hits} | {shared * 1e3:,.1f} | {own * 1e3:,.1f} | {own / shared:.2f} |"
        if server:
            shared = statistics.median(times[SHARED + " server"])
            own = statistics.median(times[PER_OWNER + " server"])
            line += (
                f" {shared * 1e3:,.1f} | {own * 1e3:,.1f} | {own / shared:.2f}"
                f" | {split[SHARED]}, {split[PER_OWNER]} |"
            )
        print(line)
    print()


def main(messages: int, repeats: int) -> None:
    fresh_databases()
    for alias in ARMS:
        started = time.monotonic()
        fill(alias, messages, shared=alias == SHARED)
        print(f"   fill of {alias} ({messages:,}): {time.monotonic() - started:.0f} s", flush=True)
    before = load_average()
    measured = measure(repeats)
    report(messages, repeats, measured, [before, load_average()])


if __name__ == "__main__":
    main(
        int(sys.argv[1]) if len(sys.argv) > 1 else 100_000,
        int(sys.argv[2]) if len(sys.argv) > 2 else 7,
    )
