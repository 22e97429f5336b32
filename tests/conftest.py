from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, connections

from anvia_django import conf, signals
from anvia_django.persistence.threads.dispatch import close_db_threads

DEFAULT_SCOPE_SETTING = dict(conf.DEFAULTS["SCOPE"])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    vendor = connection.vendor
    for item in items:
        if "postgres" in item.keywords and vendor != "postgresql":
            item.add_marker(pytest.mark.skip(reason="needs PostgreSQL (ANVIA_TEST_DB=postgres)"))
        if "sqlite" in item.keywords and vendor != "sqlite":
            item.add_marker(pytest.mark.skip(reason="needs SQLite"))
        if "mysql" in item.keywords and vendor != "mysql":
            item.add_marker(pytest.mark.skip(reason="needs MariaDB/MySQL (ANVIA_TEST_DB=mariadb)"))
        if "server" in item.keywords and vendor == "sqlite":
            item.add_marker(pytest.mark.skip(reason="needs a database server, not SQLite"))


OWNER_CHECKED_SCOPE = {"user_id": False, "metadata_keys": []}


@pytest.fixture(autouse=True, scope="session")
def _owner_checked_scope_unless_a_test_names_one() -> Iterator[None]:
    """The suite's tests from before conversation scopes (issue 27) run as
    they were written, under ``{"user_id": False}``: one conversation per
    session id, whose owner is checked. A test of another scope names it
    (``ANVIA_DJANGO["SCOPE"]`` or ``DjangoMemoryStore(scope=...)``): the
    adapters' default in the conformance, scope, tenant, migration and
    per-user LangChain tests; the ``default_scope`` fixture gives one test
    the product default."""
    original = conf.DEFAULTS["SCOPE"]
    conf.DEFAULTS["SCOPE"] = OWNER_CHECKED_SCOPE
    conf.app_settings.reload()
    yield
    conf.DEFAULTS["SCOPE"] = original
    conf.app_settings.reload()


@pytest.fixture(autouse=True, scope="session")
def _encryption_on_when_asked() -> Iterator[None]:
    """``ANVIA_TEST_ENCRYPTION=1``: the whole run with encryption at rest on
    (a test keyring), to find the paths that do not open sealed messages.
    Tests that compare raw columns or count statements then fail by design."""
    if os.environ.get("ANVIA_TEST_ENCRYPTION") != "1":
        yield
        return
    from tests.encryption.support import encryption

    original = conf.DEFAULTS["ENCRYPTION"]
    conf.DEFAULTS["ENCRYPTION"] = encryption()["ENCRYPTION"]
    conf.app_settings.reload()
    yield
    conf.DEFAULTS["ENCRYPTION"] = original
    conf.app_settings.reload()


@pytest.fixture
def default_scope() -> Iterator[None]:
    """The product's default scope (session id + user id) for one test."""
    conf.DEFAULTS["SCOPE"] = DEFAULT_SCOPE_SETTING
    conf.app_settings.reload()
    yield
    conf.DEFAULTS["SCOPE"] = OWNER_CHECKED_SCOPE
    conf.app_settings.reload()


@pytest.fixture(autouse=True)
def _store_threads_closed_after_each_test() -> Iterator[None]:
    """A test that drives the store from ``asyncio.run`` leaves the store's
    database threads with connections (a failed one, after a fault test);
    the next test must start without them, as a new process would."""
    yield
    close_db_threads()


@pytest.fixture
def appended() -> Iterator[list[dict[str, Any]]]:
    """The arguments of every ``messages_appended`` sent during the test."""
    calls: list[dict[str, Any]] = []

    def record(sender: type, **kwargs: Any) -> None:
        calls.append(kwargs)

    signals.messages_appended.connect(record)
    yield calls
    signals.messages_appended.disconnect(record)


@pytest.fixture(scope="module")
def pooled_alias() -> Iterator[str]:
    """A second alias to the test database through Django's psycopg pool.

    Module-scoped so that it exists before pytest-django checks the test's
    ``databases``.
    """
    pytest.importorskip("psycopg_pool")
    alias = "pooled"
    default = connections["default"].settings_dict
    connections.settings[alias] = {
        **default,
        "CONN_MAX_AGE": 0,
        "OPTIONS": {**default["OPTIONS"], "pool": {"min_size": 1, "max_size": 2}},
        "TEST": {**default["TEST"], "MIRROR": "default"},
    }
    try:
        yield alias
    finally:
        close_db_threads()
        connections[alias].close_pool()  # type: ignore[attr-defined]
        connections[alias].close()
        del connections.settings[alias]
