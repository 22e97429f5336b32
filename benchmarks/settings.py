"""Django settings for the benchmarks.

``ANVIA_BENCH_DB=postgres`` selects PostgreSQL (the ``ANVIA_PG_*`` variables
of tests/settings.py, database ``ANVIA_BENCH_PG_NAME``, default
``anvia_bench``), ``ANVIA_BENCH_DB=mariadb`` MariaDB (``ANVIA_MYSQL_*`` as
in tests/settings.py, database ``ANVIA_BENCH_MYSQL_NAME``, default
``anvia_bench``), anything else a SQLite file in the documented
configuration (``transaction_mode`` IMMEDIATE, WAL journal).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

SECRET_KEY = "benchmarks-only-not-secret"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
ROOT_URLCONF = "benchmarks.urls"
ALLOWED_HOSTS = ["testserver", "localhost", "127.0.0.1"]
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"

_CHOSEN = os.environ.get("ANVIA_BENCH_DB", "sqlite").lower()
BACKEND = (
    "postgres"
    if _CHOSEN in ("postgres", "postgresql")
    else "mariadb"
    if _CHOSEN in ("mariadb", "mysql")
    else "sqlite"
)

PG_CONNINFO = {
    "host": os.environ.get("ANVIA_PG_HOST", "127.0.0.1"),
    "port": os.environ.get("ANVIA_PG_PORT", "5432"),
    "user": os.environ.get("ANVIA_PG_USER", "postgres"),
    "password": os.environ.get("ANVIA_PG_PASSWORD", ""),
    "dbname": os.environ.get("ANVIA_BENCH_PG_NAME", "anvia_bench"),
}
MYSQL_CONNINFO: dict[str, Any] = {
    "host": os.environ.get("ANVIA_MYSQL_HOST", "127.0.0.1"),
    "port": int(os.environ.get("ANVIA_MYSQL_PORT", "3306")),
    "user": os.environ.get("ANVIA_MYSQL_USER", "root"),
    "password": os.environ.get("ANVIA_MYSQL_PASSWORD", ""),
    "database": os.environ.get("ANVIA_BENCH_MYSQL_NAME", "anvia_bench"),
    "charset": "utf8mb4",
}
MYSQL_ISOLATION = "read committed"
"""Django's default on MySQL/MariaDB; the raw baseline uses the same."""
SQLITE_FILE = Path(
    os.environ.get("ANVIA_BENCH_SQLITE_FILE", Path(tempfile.gettempdir()) / "anvia-bench.sqlite3")
)
SQLITE_INIT = "PRAGMA journal_mode=WAL;"
SQLITE_TIMEOUT = 30
"""Seconds a SQLite writer waits for the lock; the peers' engines get it too."""

DATABASES: dict[str, dict[str, Any]]
PREPARED_ALIAS = "prepared"
if BACKEND == "postgres":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "HOST": PG_CONNINFO["host"],
            "PORT": PG_CONNINFO["port"],
            "USER": PG_CONNINFO["user"],
            "PASSWORD": PG_CONNINFO["password"],
            "NAME": PG_CONNINFO["dbname"],
            "CONN_MAX_AGE": None,
        }
    }
    # The same database as docs/production.md recommends it without a
    # transaction-pooling proxy: the store runs the append workloads on
    # this alias too, beside Django's defaults.
    DATABASES[PREPARED_ALIAS] = {
        **DATABASES["default"],
        "OPTIONS": {"server_side_binding": True, "prepare_threshold": 5},
    }
elif BACKEND == "mariadb":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.mysql",
            "HOST": MYSQL_CONNINFO["host"],
            "PORT": str(MYSQL_CONNINFO["port"]),
            "USER": MYSQL_CONNINFO["user"],
            "PASSWORD": MYSQL_CONNINFO["password"],
            "NAME": MYSQL_CONNINFO["database"],
            "OPTIONS": {"charset": "utf8mb4", "isolation_level": MYSQL_ISOLATION},
            "CONN_MAX_AGE": None,
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(SQLITE_FILE),
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": SQLITE_TIMEOUT,
                "init_command": SQLITE_INIT,
            },
            "CONN_MAX_AGE": None,
        }
    }

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "rest_framework",
    "anvia_django",
]
MIDDLEWARE: list[str] = []
ANVIA_DJANGO: dict[str, Any] = {
    "INSPECTOR_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
}
if os.environ.get("ANVIA_BENCH_STORE_THREADS"):
    # For comparing pool sizes; "none" is asgiref's one shared thread.
    threads = os.environ["ANVIA_BENCH_STORE_THREADS"]
    ANVIA_DJANGO["STORE_THREADS"] = None if threads == "none" else int(threads)
