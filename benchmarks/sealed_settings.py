"""Settings of ``python -m benchmarks.sealed_search``: benchmarks/settings.py's
database as ``default``, a second database beside it as ``shared``, and
encryption at rest with the blind index on.

``default`` holds the messages indexed per owner (what the store writes
now), ``shared`` the same messages indexed under one key for everyone (what
versions before it wrote), so the two are searched in one process,
interleaved. The second database is ``ANVIA_BENCH_PG_NAME`` with
``_shared`` appended on PostgreSQL, ``ANVIA_BENCH_SQLITE_FILE`` with
``-shared`` appended on SQLite; both are dropped and recreated.
"""

from __future__ import annotations

from typing import Any

from . import settings as base

SECRET_KEY = base.SECRET_KEY
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
ROOT_URLCONF = base.ROOT_URLCONF
ALLOWED_HOSTS = base.ALLOWED_HOSTS
DEFAULT_AUTO_FIELD = base.DEFAULT_AUTO_FIELD
BACKEND = base.BACKEND
INSTALLED_APPS = base.INSTALLED_APPS
MIDDLEWARE: list[str] = []

SHARED_ALIAS = "shared"
SHARED_PG_NAME = f"{base.PG_CONNINFO['dbname']}_shared"
SHARED_SQLITE_FILE = base.SQLITE_FILE.with_name(base.SQLITE_FILE.name + "-shared")

_default = base.DATABASES["default"]
_shared = {**_default}
if BACKEND == "postgres":
    _shared["NAME"] = SHARED_PG_NAME
elif BACKEND == "sqlite":
    _shared["NAME"] = str(SHARED_SQLITE_FILE)
else:
    raise SystemExit("benchmarks.sealed_search runs on PostgreSQL and SQLite only")
DATABASES: dict[str, dict[str, Any]] = {"default": _default, SHARED_ALIAS: _shared}

KEY = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="  # a benchmark key, never a real one
ANVIA_DJANGO: dict[str, Any] = {
    "ENCRYPTION": {"KEYS": {"k1": KEY}, "CURRENT": "k1", "BLIND_INDEX": True},
}
