"""Time migration 0004 on a large PostgreSQL table, and what it blocks.

    ANVIA_TEST_DB=postgres python scripts/measure_migration_0004.py \\
        --messages 1000000 --per-conversation 10

Creates a scratch database (dropped at the end), migrates it to 0002, fills
it with ``--messages`` messages in conversations of ``--per-conversation``
(INSERT ... SELECT generate_series: seconds, not hours), then migrates to
0004 while two probe connections keep writing, as agents would: one updates
a conversation row (what every append does first), one inserts a message.
A third connection samples the migrating backend's locks. Prints the
migration's duration, the locks it took per table, and each probe's longest
wait, which is how long writes stall during the upgrade.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCRATCH = "anvia_migration_scratch"


def admin_connection() -> Any:
    import psycopg

    return psycopg.connect(
        host=os.environ.get("ANVIA_PG_HOST", "127.0.0.1"),
        port=os.environ.get("ANVIA_PG_PORT", "5432"),
        user=os.environ.get("ANVIA_PG_USER", "postgres"),
        password=os.environ.get("ANVIA_PG_PASSWORD", ""),
        dbname=os.environ.get("ANVIA_PG_NAME", "postgres"),
        autocommit=True,
    )


def scratch_connection() -> Any:
    import psycopg

    return psycopg.connect(
        host=os.environ.get("ANVIA_PG_HOST", "127.0.0.1"),
        port=os.environ.get("ANVIA_PG_PORT", "5432"),
        user=os.environ.get("ANVIA_PG_USER", "postgres"),
        password=os.environ.get("ANVIA_PG_PASSWORD", ""),
        dbname=SCRATCH,
        autocommit=True,
    )


def fill(messages: int, per_conversation: int) -> None:
    conversations = messages // per_conversation
    with scratch_connection() as db:
        db.execute(
            "INSERT INTO anvia_django_conversation"
            " (ref, session_id, user_id, metadata, created_at, updated_at, message_count)"
            " SELECT md5(i::text), 's-' || i, 'u-' || (i %% 1000), NULL, now(), now(), %s"
            " FROM generate_series(1, %s) AS i",
            [per_conversation, conversations],
        )
        db.execute(
            "INSERT INTO anvia_django_memorymessage"
            " (conversation_id, position, run_id, turn, role, message, created_at)"
            " SELECT c.id, p, 'run-' || (p / 2), 1,"
            " CASE WHEN p %% 2 = 0 THEN 'user' ELSE 'assistant' END,"
            ' \'{"role":"user","content":"message \' || p || \' of a long conversation"}\','
            " now() FROM anvia_django_conversation c, generate_series(0, %s - 1) AS p",
            [per_conversation],
        )
        db.execute("VACUUM ANALYZE")


class Probe(threading.Thread):
    """Runs one statement over and over; keeps the longest single wait."""

    def __init__(self, sql: str, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.sql, self.stop, self.longest, self.count = sql, stop, 0.0, 0

    def run(self) -> None:
        with scratch_connection() as db:
            while not self.stop.is_set():
                started = time.perf_counter()
                db.execute(self.sql)
                self.longest = max(self.longest, time.perf_counter() - started)
                self.count += 1
                time.sleep(0.002)


class LockSampler(threading.Thread):
    def __init__(self, pid: int, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.pid, self.stop = pid, stop
        self.seen: dict[str, set[str]] = {}

    def run(self) -> None:
        with scratch_connection() as db:
            while not self.stop.is_set():
                rows = db.execute(
                    "SELECT relation::regclass::text, mode FROM pg_locks"
                    " WHERE pid = %s AND locktype = 'relation' AND granted",
                    [self.pid],
                ).fetchall()
                for relation, mode in rows:
                    if relation.startswith("anvia_django_"):
                        self.seen.setdefault(relation, set()).add(mode)
                time.sleep(0.005)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--per-conversation", type=int, default=10)
    options = parser.parse_args()

    with admin_connection() as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {SCRATCH}")
        admin.execute(f"CREATE DATABASE {SCRATCH}")
    try:
        sys.path.insert(0, str(ROOT))
        os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
        os.environ["ANVIA_TEST_DB"] = "postgres"
        import django
        from django.conf import settings

        settings.DATABASES["default"]["NAME"] = SCRATCH
        django.setup()
        from django.core.management import call_command
        from django.db import connection

        call_command("migrate", verbosity=0)
        call_command("migrate", "anvia_django", "0002", verbosity=0)
        started = time.perf_counter()
        fill(options.messages, options.per_conversation)
        print(f"filled {options.messages:,} messages in {time.perf_counter() - started:.1f} s")

        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            (pid,) = cursor.fetchone()
        stop = threading.Event()
        conversation_probe = Probe(
            "UPDATE anvia_django_conversation SET updated_at = now() WHERE id = 1", stop
        )
        message_probe = Probe(
            "INSERT INTO anvia_django_memorymessage"
            " (conversation_id, position, run_id, turn, role, message, created_at)"
            " SELECT 2, coalesce(max(position), 0) + 1, 'probe', 1, 'user', '{}', now()"
            " FROM anvia_django_memorymessage WHERE conversation_id = 2",
            stop,
        )
        sampler = LockSampler(pid, stop)
        for thread in (conversation_probe, message_probe, sampler):
            thread.start()
        time.sleep(0.5)
        started = time.perf_counter()
        call_command("migrate", "anvia_django", "0004", verbosity=0)
        took = time.perf_counter() - started
        time.sleep(0.5)
        stop.set()
        for thread in (conversation_probe, message_probe, sampler):
            thread.join()
        connection.close()

        print(f"migration 0002 -> 0004: {took:.3f} s")
        for relation, modes in sorted(sampler.seen.items()):
            print(f"  {relation}: {', '.join(sorted(modes))}")
        print(
            f"longest wait of a conversation update: {conversation_probe.longest * 1000:.1f} ms"
            f" ({conversation_probe.count} probes)"
        )
        print(
            f"longest wait of a message insert: {message_probe.longest * 1000:.1f} ms"
            f" ({message_probe.count} probes)"
        )
    finally:
        with admin_connection() as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                [SCRATCH],
            )
            admin.execute(f"DROP DATABASE IF EXISTS {SCRATCH}")


if __name__ == "__main__":
    main()
