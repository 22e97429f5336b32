"""Schemathesis against the inspector's own OpenAPI schema, in process.

Requests go to the Django WSGI application directly (no network). As staff
every response must match the schema and none may be a 5xx; as an anonymous
caller every answer must be a 401/403 carrying no stored data.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from django.test import override_settings
from hypothesis import HealthCheck, given, settings

from anvia_django.core.memory import MemoryContext, MemoryErrorInput
from anvia_django.store import DjangoMemoryStore
from tests.helpers import append_input, assistant, run, user

from .budget import scaled
from .report import record

schemathesis = pytest.importorskip("schemathesis")
pytest.importorskip("drf_spectacular")

from schemathesis.specs.openapi.checks import (  # noqa: E402
    ignored_auth,
    positive_data_acceptance,
)

pytestmark = pytest.mark.django_db

SCHEMA_URL = "/anvia/api/schema/"
SECRET = "stored-secret-content"
PASSWORD = "fuzz-password"


def basic(username: str) -> dict[str, str]:
    token = base64.b64encode(f"{username}:{PASSWORD}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


@pytest.fixture(autouse=True)
def basic_authentication_unthrottled() -> Any:
    """The fuzzer calls as a script does: with HTTP Basic, which a project
    names for the inspector (its default is the admin's session), and more
    often than the default throttle allows one caller."""
    scripted = {
        "INSPECTOR_AUTHENTICATION_CLASSES": [
            "rest_framework.authentication.SessionAuthentication",
            "rest_framework.authentication.BasicAuthentication",
        ],
        "INSPECTOR_THROTTLE_RATE": None,
    }
    with override_settings(ANVIA_DJANGO=scripted):
        yield


@pytest.fixture(autouse=True)
def keep_the_test_connection() -> Any:
    """The WSGI handler closes connections around each request; the test's
    transaction must survive, as Django's own test client arranges."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def stored() -> None:
    store = DjangoMemoryStore()
    for n in range(3):
        run(
            store.append,
            append_input(f"fuzz-{n}", [user(SECRET), assistant("ok")], user_id=f"u{n}"),
        )
    failure = MemoryErrorInput(MemoryContext("fuzz-0"), "run-2", ValueError(SECRET), [])
    run(store.record_error, failure)


def load_schema() -> Any:
    get_user_model().objects.create_user("fuzz-staff", password=PASSWORD, is_staff=True)
    return schemathesis.openapi.from_wsgi(
        SCHEMA_URL, get_wsgi_application(), headers=basic("fuzz-staff")
    )


def operations(schema: Any) -> list[Any]:
    found = [result.ok() for result in schema.get_all_operations()]
    assert {operation.method.upper() for operation in found} == {"GET"}
    assert len(found) >= 3
    return found


FUZZ_SETTINGS = settings(
    max_examples=scaled(ci=40, long=500, smoke=15),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    database=None,
)
# A refusal comes before the view reads a parameter: a few inputs per
# operation show that none gets past it, with or without valid parameters.
REFUSED_SETTINGS = settings(FUZZ_SETTINGS, max_examples=scaled(ci=10, long=100, smoke=5))


@pytest.mark.usefixtures("stored")
def test_staff_get_schema_conformant_answers_and_no_server_error() -> None:
    schema = load_schema()
    calls = 0
    for operation in operations(schema):

        @FUZZ_SETTINGS
        @given(case=operation.as_strategy())
        def check(case: Any) -> None:
            nonlocal calls
            calls += 1
            response = case.call(headers=basic("fuzz-staff"))
            assert response.status_code < 500, response.text
            # ignored_auth would flag our own forced staff credentials (the
            # refused callers have their own test below); positive_data_acceptance
            # would flag the 400 for a schema-valid string that is not a cursor
            # the server issued, which is checked here instead.
            case.validate_response(
                response,
                headers=basic("fuzz-staff"),
                excluded_checks=[ignored_auth, positive_data_acceptance],
            )
            if response.status_code == 400:
                named = set(json.loads(response.text))
                assert named <= {
                    "limit",
                    "cursor",
                    "after",
                    "userId",
                    "runId",
                    "q",
                    "threadId",
                    "checkpointNs",
                }, response.text
                assert named

        check()
    record("api fuzzing", requests=calls, server_errors=0, schema_violations=0)


@pytest.mark.usefixtures("stored")
@pytest.mark.parametrize("caller", ["anonymous", "non-staff user", "wrong password"])
def test_callers_the_permissions_refuse_never_get_data(caller: str) -> None:
    schema = load_schema()
    get_user_model().objects.create_user("fuzz-plain", password=PASSWORD)
    headers = {
        "anonymous": {},
        "non-staff user": basic("fuzz-plain"),
        "wrong password": {"Authorization": "Basic " + base64.b64encode(b"fuzz-staff:x").decode()},
    }[caller]
    calls = 0
    for operation in operations(schema):

        @REFUSED_SETTINGS
        @given(case=operation.as_strategy())
        def check(case: Any) -> None:
            nonlocal calls
            calls += 1
            case.headers = {k: v for k, v in (case.headers or {}).items() if k != "Authorization"}
            response = case.call(headers=headers)
            assert response.status_code in (401, 403), (response.status_code, response.text)
            assert SECRET not in response.text
            body = json.loads(response.text)
            assert set(body) == {"detail"}

        check()
    record("api fuzzing", requests=calls, refused_without_data=calls)
