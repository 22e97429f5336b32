from __future__ import annotations

import contextvars
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from _pytest import runner
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import connection, connections
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from rest_framework.test import APIClient

from anvia_django import conf, signals
from anvia_django.persistence.threads.dispatch import close_db_threads
from tests.reliability.budget import level

HYPOTHESIS_EXAMPLES = {"smoke": 50, "ci": 100, "long": 1000}
"""Examples per property test at each size of the run (ANVIA_RELIABILITY),
unless a test names its own ``max_examples``."""

for _size, _examples in HYPOTHESIS_EXAMPLES.items():
    # Randomized everywhere: each run searches new examples (Hypothesis's
    # own "ci" profile, which it loads when CI is set, would try the same
    # ones every time). A failure prints its @reproduce_failure blob, and
    # ``--hypothesis-seed=N`` replays a whole run's choices.
    hypothesis_settings.register_profile(
        f"anvia-{_size}",
        max_examples=_examples,
        derandomize=False,
        deadline=None,  # a shared 2-core machine: no timing in tests
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow],
        database=None if os.environ.get("CI") else hypothesis_settings().database,
    )
# Loaded on import, before the test modules build their settings from it;
# ``--hypothesis-profile`` (or HYPOTHESIS_PROFILE) still picks another.
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or f"anvia-{level()}")


def pytest_report_header(config: pytest.Config) -> str:
    profile = hypothesis_settings.get_current_profile_name()
    return f"hypothesis: {profile}, randomized; a failure prints @reproduce_failure to replay it"


DEFAULT_SCOPE_SETTING = dict(conf.DEFAULTS["SCOPE"])


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool:
    """Each test runs in a copy of the context, dropped after it.

    ``async_to_sync`` copies the context variables its event loop's thread
    made back into the caller's context; Django's ``connections`` makes one
    in each new such thread (asgiref's ``Local``), so every call from a sync
    test left one more behind. A worker's context grew by thousands over a
    run, and each ``async_to_sync`` call walks all of them: the model-based
    tests ran 4-15 times slower late in a run than alone."""
    contextvars.copy_context().run(runner.pytest_runtest_protocol, item, nextitem)
    return True


# Marks that say which databases a test needs: the vendors it runs on, and
# its reason to skip elsewhere.
NEEDS: dict[str, tuple[Callable[[str], bool], str]] = {
    "postgres": (lambda v: v == "postgresql", "needs PostgreSQL (ANVIA_TEST_DB=postgres)"),
    "sqlite": (lambda v: v == "sqlite", "needs SQLite"),
    "mysql": (lambda v: v == "mysql", "needs MariaDB/MySQL (ANVIA_TEST_DB=mariadb)"),
    "server": (lambda v: v != "sqlite", "needs a database server, not SQLite"),
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skips the tests marked for other databases, and makes a test marked
    ``transactional_on(*vendors)`` transactional on those vendors only.

    Marks, not keywords: a parameter or a test named "sqlite" is no mark.
    Runs before pytest-django's own hook, which orders the tests by the
    kind of database access they end up with.
    """
    vendor = connection.vendor
    core = Path(__file__).parent / "core"
    for item in items:
        if vendor != "sqlite" and core in item.path.parents:
            # The framework-neutral core touches no database: the SQLite
            # cells run it, the servers' cells would only repeat it.
            item.add_marker(pytest.mark.skip(reason="no database: runs in the SQLite cells"))
            continue
        for name, (runs_on, reason) in NEEDS.items():
            if item.get_closest_marker(name) is not None and not runs_on(vendor):
                item.add_marker(pytest.mark.skip(reason=reason))
        transactional_on = item.get_closest_marker("transactional_on")
        if transactional_on is not None:
            item.add_marker(_django_db_for(item, vendor in transactional_on.args), append=False)


def _django_db_for(item: pytest.Item, transaction: bool) -> pytest.MarkDecorator:
    """The item's ``django_db`` mark with ``transaction`` set: a test that
    needs committed rows on one database (MariaDB's full-text index sees
    only those) pays for the flush after it there and nowhere else."""
    django_db = item.get_closest_marker("django_db")
    if django_db is not None and (django_db.args or "transaction" in django_db.kwargs):
        raise pytest.UsageError(
            f"{item.nodeid}: transactional_on decides transaction=; drop it from django_db"
        )
    kwargs = {} if django_db is None else dict(django_db.kwargs)
    return pytest.mark.django_db(transaction=transaction, **kwargs)


@pytest.fixture(
    params=[
        pytest.param(True, marks=pytest.mark.server, id="processes"),
        pytest.param(False, id="threads"),
    ]
)
def processes(request: pytest.FixtureRequest) -> bool:
    """A concurrency test's workers: OS processes (on a server: SQLite's
    one writer makes separate processes no different race from threads),
    then threads of the test process (tests/concurrently.py)."""
    return bool(request.param)


OWNER_CHECKED_SCOPE = {"user_id": False, "metadata_keys": []}


@pytest.fixture(autouse=True, scope="session")
def _postgresql_test_flush_deletes() -> Iterator[None]:
    """After a transactional test, PostgreSQL's flush DELETEs the rows
    instead of TRUNCATE: on the few rows a test leaves, TRUNCATE (new files
    for every table and index) took about 45 ms a test, DELETE about 2 ms.
    The flush command runs its statements in one transaction, and Django's
    foreign keys on PostgreSQL are deferred, so the order does not matter."""
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate = DatabaseOperations.sql_flush

    def delete_rows(
        self: Any,
        style: Any,
        tables: Sequence[str],
        *,
        reset_sequences: bool = False,
        allow_cascade: bool = False,
    ) -> list[str]:
        if reset_sequences or allow_cascade:
            return truncate(
                self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
            )
        return [f"DELETE FROM {self.quote_name(table)};" for table in tables]

    DatabaseOperations.sql_flush = delete_rows  # type: ignore[method-assign]
    yield
    DatabaseOperations.sql_flush = truncate  # type: ignore[method-assign]


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
def _throttle_counts_forgotten_after_each_test() -> Iterator[None]:
    """The inspector API's throttle counts each user's requests in the cache;
    user ids come again in the next test (rolled back), and its requests
    must not count against this one's."""
    yield
    cache.clear()


@pytest.fixture(autouse=True)
def _store_threads_closed_after_each_test() -> Iterator[None]:
    """A test that drives the store from ``asyncio.run`` leaves the store's
    database threads with connections (a failed one, after a fault test);
    the next test must start without them, as a new process would."""
    yield
    close_db_threads()


@pytest.fixture
def staff() -> APIClient:
    """An API client authenticated as a staff member ("staff"), holding no
    permissions of its own: what the inspector API's default rule lets in.

    ``force_authenticate``: no session or user queries, so a test's query
    counts are the API's own. The test must have database access."""
    client = APIClient()
    client.force_authenticate(User.objects.create_user("staff", is_staff=True))
    return client


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
    ``databases``. ``psycopg_pool`` comes with the dev extra: without it the
    test fails rather than skip unseen.
    """
    import psycopg_pool  # noqa: F401 - Django's pool option needs it

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
