"""Settings for the example project: the demo agent, its chat page, the admin
and the inspector API.

SQLite (``db.sqlite3`` beside ``manage.py``) by default, in the configuration
anvia_django documents; PostgreSQL or any other database when
``DATABASE_URL`` is set (``postgres://user:password@host:5432/name``).
Not a production configuration: DEBUG is on and the secret key is public.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-project-insecure-key-do-not-deploy")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]"]

USE_TZ = True
TIME_ZONE = "UTC"
LANGUAGE_CODE = "en-us"
USE_I18N = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    # Swagger UI's and ReDoc's scripts, served from here: the docs pages work offline.
    "drf_spectacular_sidecar",
    "anvia_django",
    "example_project.demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "example_project.urls"
WSGI_APPLICATION = "example_project.wsgi.application"
ASGI_APPLICATION = "example_project.asgi.application"

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


def databases(url: str | None) -> dict[str, dict[str, Any]]:
    if url:
        # Imported here so the SQLite default needs nothing beyond the app.
        import dj_database_url

        database: dict[str, Any] = dict(dj_database_url.parse(url, conn_max_age=60))
        if database["ENGINE"].endswith("sqlite3"):
            database["OPTIONS"] = {"transaction_mode": "IMMEDIATE", "timeout": 20}
        return {"default": database}
    return {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("ANVIA_DEMO_SQLITE", str(BASE_DIR / "db.sqlite3")),
            # What anvia_django documents for SQLite (system check anvia_django.W001):
            # writers take the lock up front instead of failing on upgrade.
            "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 20},
        }
    }


DATABASES = databases(os.environ.get("DATABASE_URL"))

STATIC_URL = "static/"
LOGIN_URL = "admin:login"

ANVIA_DJANGO: dict[str, Any] = {
    "INSPECTOR_DEFAULT_LIMIT": 50,
    # The admin's rule for the API too: staff with the view permission of
    # what an endpoint shows (demo_setup grants every view permission).
    "INSPECTOR_PERMISSION_CLASSES": ["anvia_django.api.permissions.AdminViewPermission"],
}
