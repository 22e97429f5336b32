from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from anvia_django.checks import check_settings, check_sqlite_transaction_mode, check_use_tz

SQLITE_WITHOUT_IMMEDIATE = {
    "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
}


def ids(messages: list[Any]) -> list[str]:
    return [m.id for m in messages]


def test_the_test_settings_pass_every_check() -> None:
    assert check_settings() == []
    assert check_use_tz() == []
    assert check_sqlite_transaction_mode() == []


@pytest.mark.sqlite
def test_sqlite_without_immediate_transactions_warns(settings) -> None:
    from django.db import connections

    options = connections.settings["default"].setdefault("OPTIONS", {})
    saved = dict(options)
    options.pop("transaction_mode", None)
    try:
        messages = check_sqlite_transaction_mode()
    finally:
        options.update(saved)
    assert ids(messages) == ["anvia_django.W001"]
    assert "transaction_mode" in str(messages[0].hint)


@pytest.mark.parametrize(
    ("configured", "expected"),
    [
        ({"INSPECTOR_MAX_LIMTI": 10}, ["anvia_django.W003"]),
        ({"INSPECTOR_DEFAULT_LIMIT": 500}, ["anvia_django.E002"]),
        ({"INSPECTOR_MAX_LIMIT": 0}, ["anvia_django.E002"]),
        ({"MAX_MESSAGE_BYTES": -1}, ["anvia_django.E003"]),
        ({"MAX_MESSAGE_BYTES": None}, []),
        ({"MAX_NESTING_DEPTH": "deep"}, ["anvia_django.E004"]),
    ],
)
def test_settings_mistakes_are_reported(configured: dict[str, Any], expected: list[str]) -> None:
    with override_settings(ANVIA_DJANGO=configured):
        assert ids(check_settings()) == expected


def test_settings_must_be_a_dict() -> None:
    with override_settings(ANVIA_DJANGO=["INSPECTOR_MAX_LIMIT"]):
        assert ids(check_settings()) == ["anvia_django.E001"]


def test_naive_timestamps_outside_utc_warn() -> None:
    with override_settings(USE_TZ=False, TIME_ZONE="Europe/Paris"):
        assert ids(check_use_tz()) == ["anvia_django.W002"]
    with override_settings(USE_TZ=False, TIME_ZONE="UTC"):
        assert check_use_tz() == []


@pytest.mark.django_db
def test_errors_stop_the_check_command() -> None:
    with (
        override_settings(ANVIA_DJANGO={"INSPECTOR_MAX_LIMIT": -5}),
        pytest.raises(SystemCheckError, match=r"anvia_django\.E002"),
    ):
        call_command("check", stdout=StringIO(), stderr=StringIO())


@pytest.mark.django_db
def test_warnings_show_in_the_check_command() -> None:
    out = StringIO()
    with override_settings(ANVIA_DJANGO={"UNKNOWN": 1}):
        call_command("check", stdout=out, stderr=out)
    assert "anvia_django.W003" in out.getvalue()
