"""Settings for the test suite.

``ANVIA_TEST_DB=postgres`` runs it on PostgreSQL (``ANVIA_PG_*`` variables),
``ANVIA_TEST_DB=mariadb`` (or ``mysql``) on MariaDB/MySQL (``ANVIA_MYSQL_*``),
anything else on a SQLite file in the documented configuration.
``ANVIA_TEST_DIALECT=generic`` makes the store use its plain-ORM SQL dialect.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path
from typing import Any

SECRET_KEY = "tests-only-not-secret"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
ROOT_URLCONF = "tests.urls"
ALLOWED_HOSTS = ["testserver", "localhost", "127.0.0.1"]
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"  # the app must not follow it

BACKEND = os.environ.get("ANVIA_TEST_DB", "sqlite").lower()

DATABASES: dict[str, dict[str, Any]]
if BACKEND in ("postgres", "postgresql"):
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "HOST": os.environ.get("ANVIA_PG_HOST", "127.0.0.1"),
            "PORT": os.environ.get("ANVIA_PG_PORT", "5432"),
            "USER": os.environ.get("ANVIA_PG_USER", "postgres"),
            "PASSWORD": os.environ.get("ANVIA_PG_PASSWORD", ""),
            "NAME": os.environ.get("ANVIA_PG_NAME", "postgres"),
            "TEST": {"NAME": os.environ.get("ANVIA_PG_TEST_NAME", "test_anvia")},
        }
    }
    # The test database need not survive a crash of the server: a commit
    # returns before its WAL reaches the disk. Locks and what each
    # transaction sees are unchanged.
    DATABASES["default"]["OPTIONS"] = {"options": "-c synchronous_commit=off"}
    if os.environ.get("ANVIA_PG_PREPARED") == "1":
        # What docs/production.md recommends without a transaction-pooling
        # proxy: server-side parameters, statements prepared on reuse.
        DATABASES["default"]["OPTIONS"] |= {"server_side_binding": True, "prepare_threshold": 5}
    # More databases, each set up only for the tests that name it in
    # ``databases``: "other" for ``using=`` and routers, "keys" for the data
    # key table on a database of its own (tests/encryption/test_key_database.py).
    DATABASES["other"] = {
        **DATABASES["default"],
        "TEST": {"NAME": DATABASES["default"]["TEST"]["NAME"] + "_other"},
    }
    DATABASES["keys"] = {
        **DATABASES["default"],
        "TEST": {"NAME": DATABASES["default"]["TEST"]["NAME"] + "_keys"},
    }
elif BACKEND in ("mariadb", "mysql"):
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.mysql",
            "HOST": os.environ.get("ANVIA_MYSQL_HOST", "127.0.0.1"),
            "PORT": os.environ.get("ANVIA_MYSQL_PORT", "3306"),
            "USER": os.environ.get("ANVIA_MYSQL_USER", "root"),
            "PASSWORD": os.environ.get("ANVIA_MYSQL_PASSWORD", ""),
            "NAME": os.environ.get("ANVIA_MYSQL_NAME", "mysql"),
            "OPTIONS": {
                "charset": "utf8mb4",
                # Django's default; ANVIA_MYSQL_ISOLATION tries another.
                "isolation_level": os.environ.get("ANVIA_MYSQL_ISOLATION", "read committed"),
            },
            # The server's default collation (case-insensitive), and a
            # charset ANVIA_MYSQL_TEST_CHARSET=utf8mb3 can make 3-byte: the
            # app's own columns must depend on neither.
            "TEST": {
                "NAME": os.environ.get("ANVIA_MYSQL_TEST_NAME", "test_anvia"),
                "CHARSET": os.environ.get("ANVIA_MYSQL_TEST_CHARSET", "utf8mb4"),
            },
        }
    }
    DATABASES["other"] = {
        **DATABASES["default"],
        "TEST": {
            **DATABASES["default"]["TEST"],
            "NAME": DATABASES["default"]["TEST"]["NAME"] + "_other",
        },
    }
    DATABASES["keys"] = {
        **DATABASES["default"],
        "TEST": {
            **DATABASES["default"]["TEST"],
            "NAME": DATABASES["default"]["TEST"]["NAME"] + "_keys",
        },
    }
else:
    # A file, not :memory:, so threads get their own connections to one database.
    _sqlite_dir = Path(os.environ.get("ANVIA_SQLITE_DIR", tempfile.gettempdir()))
    _sqlite_file = _sqlite_dir / f"anvia-test-{os.getpid()}.sqlite3"
    # The documented configuration, less the sync to disk at every commit:
    # the test database need not survive a crash of the machine. Locking
    # (one writer, the busy timeout) is unchanged.
    _sqlite_options = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
        "init_command": "PRAGMA synchronous=OFF",
    }
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(_sqlite_file),
            "OPTIONS": dict(_sqlite_options),
            "TEST": {"NAME": str(_sqlite_file)},
        },
        "other": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(_sqlite_file.with_suffix(".other.sqlite3")),
            "OPTIONS": dict(_sqlite_options),
            "TEST": {"NAME": str(_sqlite_file.with_suffix(".other.sqlite3"))},
        },
        "keys": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(_sqlite_file.with_suffix(".keys.sqlite3")),
            "OPTIONS": dict(_sqlite_options),
            "TEST": {"NAME": str(_sqlite_file.with_suffix(".keys.sqlite3"))},
        },
    }

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "anvia_django",
]
if importlib.util.find_spec("drf_spectacular_sidecar") is not None:
    # Swagger UI and ReDoc load their scripts from the static files (the openapi extra).
    INSTALLED_APPS.append("drf_spectacular_sidecar")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

if os.environ.get("ANVIA_TEST_DIALECT"):
    ANVIA_DJANGO = {"SQL_DIALECT": os.environ["ANVIA_TEST_DIALECT"]}

STATIC_URL = "/static/"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
