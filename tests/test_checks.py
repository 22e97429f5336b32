from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from anvia_django.checks import (
    check_database_vendors,
    check_settings,
    check_sqlite_transaction_mode,
    check_use_tz,
)

SQLITE_WITHOUT_IMMEDIATE = {
    "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
}


def ids(messages: list[Any]) -> list[str]:
    return [m.id for m in messages]


def test_the_test_settings_pass_every_check() -> None:
    assert check_settings() == []
    assert check_use_tz() == []
    assert check_sqlite_transaction_mode() == []
    assert check_database_vendors() == []


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
        ({"SQL_DIALECT": "oracle"}, ["anvia_django.E005"]),
        ({"SQL_DIALECT": "generic"}, []),
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


@pytest.fixture
def default_database_is(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Make the default connection report another vendor and OPTIONS."""
    from django.db import connections

    def pretend(vendor: str, **options: Any) -> None:
        monkeypatch.setattr(connections["default"], "vendor", vendor)
        settings_dict = connections.settings["default"]
        monkeypatch.setitem(
            settings_dict, "OPTIONS", {**settings_dict.get("OPTIONS", {}), **options}
        )

    return pretend


def test_an_unknown_vendor_warns_what_is_not_guaranteed(default_database_is: Any) -> None:
    default_database_is("oracle")
    messages = check_database_vendors()
    assert ids(messages) == ["anvia_django.W004"]
    assert "'oracle'" in messages[0].msg
    assert "deadlock" in messages[0].msg
    assert "4-byte" in messages[0].msg


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"charset": "utf8mb4", "isolation_level": "read committed"}, []),
        ({"isolation_level": "repeatable read"}, []),
        ({"charset": "utf8"}, ["anvia_django.W005"]),
        (
            {"charset": "utf8mb3", "isolation_level": "serializable"},
            ["anvia_django.W005", "anvia_django.W006"],
        ),
        ({"isolation_level": "SERIALIZABLE"}, ["anvia_django.W006"]),
    ],
)
def test_mysql_options_that_break_guarantees_warn(
    default_database_is: Any, options: dict[str, str], expected: list[str]
) -> None:
    default_database_is("mysql", **options)
    assert ids(check_database_vendors()) == expected


@pytest.mark.django_db
def test_database_warnings_show_in_the_check_command(default_database_is: Any) -> None:
    default_database_is("mysql", charset="latin1", isolation_level="serializable")
    out = StringIO()
    call_command("check", stdout=out, stderr=out)
    assert "anvia_django.W005" in out.getvalue()
    assert "anvia_django.W006" in out.getvalue()
    default_database_is("oracle")
    call_command("check", stdout=out, stderr=out)
    assert "anvia_django.W004" in out.getvalue()
