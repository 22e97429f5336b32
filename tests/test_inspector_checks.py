"""System checks for the inspector settings."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from anvia_django.checks import check_inspector_settings


def ids(**settings: Any) -> list[str]:
    with override_settings(ANVIA_DJANGO=settings):
        return [message.id for message in check_inspector_settings()]  # type: ignore[misc]


def test_the_defaults_pass() -> None:
    assert ids() == []


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"INSPECTOR_PERMISSION_CLASSES": ["no.such.Permission"]}, "anvia_django.E101"),
        (
            {"INSPECTOR_PERMISSION_CLASSES": "rest_framework.permissions.IsAdminUser"},
            "anvia_django.E101",
        ),
        ({"INSPECTOR_PERMISSION_CLASSES": [42]}, "anvia_django.E101"),
        ({"INSPECTOR_AUTHENTICATION_CLASSES": ["rest_framework.nope.Auth"]}, "anvia_django.E102"),
        ({"INSPECTOR_MESSAGES_DEFAULT_LIMIT": 600}, "anvia_django.E103"),
        ({"INSPECTOR_MESSAGES_MAX_LIMIT": 0}, "anvia_django.E103"),
        ({"ADMIN_TRANSCRIPT_PAGE_SIZE": "100"}, "anvia_django.E104"),
        ({"INSPECTOR_OWNER_MODE": "yes"}, "anvia_django.E105"),
        ({"INSPECTOR_THROTTLE_RATE": "fast"}, "anvia_django.E107"),
        ({"INSPECTOR_THROTTLE_RATE": "10/fortnight"}, "anvia_django.E107"),
        ({"INSPECTOR_THROTTLE_RATE": 600}, "anvia_django.E107"),
        (
            {
                "INSPECTOR_OWNER_MODE": True,
                "INSPECTOR_USER_RESOLVER": "tests.nowhere.resolver",
                "INSPECTOR_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
            },
            "anvia_django.E106",
        ),
        ({"INSPECTOR_OWNER_MODE": True}, "anvia_django.W101"),
    ],
)
def test_misconfigurations_are_reported(settings: dict[str, Any], expected: str) -> None:
    assert ids(**settings) == [expected]


def test_a_working_owner_mode_passes() -> None:
    assert (
        ids(
            INSPECTOR_OWNER_MODE=True,
            INSPECTOR_PERMISSION_CLASSES=["rest_framework.permissions.IsAuthenticated"],
            INSPECTOR_AUTHENTICATION_CLASSES=[
                "rest_framework.authentication.SessionAuthentication"
            ],
        )
        == []
    )


@override_settings(ANVIA_DJANGO={"INSPECTOR_PERMISSION_CLASSES": ["no.such.Permission"]})
def test_manage_py_check_reports_them() -> None:
    with pytest.raises(SystemCheckError, match=r"anvia_django\.E101"):
        call_command("check")
