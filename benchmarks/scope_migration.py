"""How long migration 0008 (conversation scopes) holds the conversation
table, on a table of N conversations (half of them with a user id).

    ANVIA_BENCH_DB=postgres python -m benchmarks.scope_migration 1000000

Fills the table at 0007 with one SQL statement run by the database, then
times ``migrate anvia_django 0008`` and each statement it sends. On
PostgreSQL the migration is one transaction, so the table is locked for
all of it; on MariaDB and SQLite each DDL statement locks it for its own
duration.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")
django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from .database import create_fresh_database  # noqa: E402
from .raw import CONV  # noqa: E402

_COLUMNS = "(ref, session_id, user_id, created_at, updated_at, message_count)"
_FILL = {
    "postgres": f"INSERT INTO {CONV} {_COLUMNS} SELECT 'r' || g, 's' || g, "
    "CASE WHEN g %% 2 = 0 THEN 'user-' || (g %% 5000) END, now(), now(), 0 "
    "FROM generate_series(1, %s) AS g",
    "mariadb": f"INSERT INTO {CONV} {_COLUMNS} SELECT CONCAT('r', seq), CONCAT('s', seq), "
    "CASE WHEN seq % 2 = 0 THEN CONCAT('user-', seq % 5000) END, NOW(6), NOW(6), 0 "
    "FROM seq_1_to_{n}",
    "sqlite": f"WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < %s) "
    f"INSERT INTO {CONV} {_COLUMNS} SELECT 'r' || n, 's' || n, "
    "CASE WHEN n %% 2 = 0 THEN 'user-' || (n %% 5000) END, "
    "strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now'), strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now'), 0 "
    "FROM g",
}


def main(conversations: int) -> None:
    create_fresh_database()
    call_command("migrate", "anvia_django", "0007", verbosity=0)
    backend = settings.BACKEND
    sql = _FILL[backend]
    with connection.cursor() as cursor:
        if backend == "mariadb":
            cursor.execute(sql.replace("{n}", str(conversations)))
        else:
            cursor.execute(sql, [conversations])
    statements: list[tuple[float, str]] = []

    def timed(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            statements.append((time.perf_counter() - started, " ".join(sql.split())[:90]))

    started = time.perf_counter()
    with connection.execute_wrapper(timed):
        call_command("migrate", "anvia_django", "0008", verbosity=0)
    total = time.perf_counter() - started
    print(f"{backend}, {conversations:,} conversations: migrate 0008 took {total:.2f} s")
    for seconds, text in sorted(statements, reverse=True)[:6]:
        print(f"  {seconds:7.2f} s  {text}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
