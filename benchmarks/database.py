"""A fresh benchmark database with the app's schema, made by its migrations."""

from __future__ import annotations

import importlib
import os
import sqlite3
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.db import connection, connections

from . import settings as bench_settings

TABLES = ("anvia_django_memorymessage", "anvia_django_failedrun", "anvia_django_conversation")
# Also emptied: they reference conversations (TRUNCATE must name them too).
LIFECYCLE_TABLES = ("anvia_django_agentrun", "anvia_django_memorysummary")


def pg_conninfo(**overrides: Any) -> str:
    import psycopg

    info = {**bench_settings.PG_CONNINFO, **overrides}
    return psycopg.conninfo.make_conninfo(**{k: v for k, v in info.items() if v})


def mysql_connect(**overrides: Any) -> Any:
    """A MySQLdb connection to the benchmark database (autocommit off)."""
    # Imported by name: mysqlclient ships no type stubs, and callers treat
    # the connection as Any anyway.
    driver = importlib.import_module("MySQLdb")
    info = {**bench_settings.MYSQL_CONNINFO, **overrides}
    conn = driver.connect(**info)
    conn.cursor().execute(
        f"SET SESSION TRANSACTION ISOLATION LEVEL {bench_settings.MYSQL_ISOLATION.upper()}"
    )
    return conn


def _mysql_statements(*statements: str) -> None:
    conn = mysql_connect()
    try:
        cursor = conn.cursor()
        for statement in statements:
            cursor.execute(statement)
            cursor.fetchall()
        conn.commit()
    finally:
        conn.close()


def create_fresh_database() -> None:
    """Drop and recreate the benchmark database, then migrate into it."""
    connections.close_all()
    if settings.BACKEND == "postgres":
        import psycopg

        name = bench_settings.PG_CONNINFO["dbname"]
        with psycopg.connect(pg_conninfo(dbname="postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
            admin.execute(f'CREATE DATABASE "{name}"')
    elif settings.BACKEND == "mariadb":
        name = bench_settings.MYSQL_CONNINFO["database"]
        admin = mysql_connect(database="mysql")
        try:
            admin.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
            admin.cursor().execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        finally:
            admin.close()
    else:
        for suffix in ("", "-wal", "-shm"):
            bench_settings.SQLITE_FILE.with_name(bench_settings.SQLITE_FILE.name + suffix).unlink(
                missing_ok=True
            )
    call_command("migrate", verbosity=0, interactive=False)
    if os.environ.get("ANVIA_BENCH_WITHOUT_SEARCH_INDEX") == "1":
        # What the content-search index costs an append: the same run without it.
        call_command("migrate", "anvia_django", "0006", verbosity=0, interactive=False)
    connections.close_all()


def empty_tables() -> None:
    """Delete every stored conversation, on a short-lived raw connection."""
    if settings.BACKEND == "postgres":
        import psycopg

        with psycopg.connect(pg_conninfo(), autocommit=True) as conn:
            # CASCADE: every other table that references conversations (the
            # integrations' too) is emptied with them.
            conn.execute(
                f"TRUNCATE {', '.join(LIFECYCLE_TABLES + TABLES)} RESTART IDENTITY CASCADE"
            )
            conn.execute(f"VACUUM ANALYZE {TABLES[0]}, {TABLES[2]}")
    elif settings.BACKEND == "mariadb":
        # TRUNCATE refuses tables that foreign keys point at, even empty ones.
        _mysql_statements(
            "SET FOREIGN_KEY_CHECKS = 0",
            *(f"TRUNCATE TABLE {table}" for table in LIFECYCLE_TABLES + TABLES),
            "SET FOREIGN_KEY_CHECKS = 1",
            f"ANALYZE TABLE {TABLES[0]}, {TABLES[2]}",
        )
    else:
        db = sqlite3.connect(bench_settings.SQLITE_FILE, isolation_level=None, timeout=30)
        try:
            for table in LIFECYCLE_TABLES + TABLES:
                db.execute(f"DELETE FROM {table}")
            db.execute("ANALYZE")
        finally:
            db.close()


def analyze() -> None:
    if settings.BACKEND == "postgres":
        import psycopg

        with psycopg.connect(pg_conninfo(), autocommit=True) as conn:
            conn.execute(f"VACUUM ANALYZE {TABLES[0]}, {TABLES[2]}")
    elif settings.BACKEND == "mariadb":
        _mysql_statements(f"ANALYZE TABLE {TABLES[0]}, {TABLES[2]}")
    else:
        db = sqlite3.connect(bench_settings.SQLITE_FILE, isolation_level=None, timeout=30)
        try:
            db.execute("ANALYZE")
        finally:
            db.close()


def server_version() -> str:
    if settings.BACKEND == "postgres":
        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            return f"PostgreSQL {cursor.fetchone()[0]}"
    if settings.BACKEND == "mariadb":
        with connection.cursor() as cursor:
            cursor.execute("SELECT VERSION()")
            return f"MariaDB {cursor.fetchone()[0]}"
    return f"SQLite {sqlite3.sqlite_version}"
