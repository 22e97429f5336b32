"""The test matrix: Python x Django x database, plus lint and type checks.

``make test`` (scripts/test.sh) runs every session; ``nox -l`` lists them.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time

import nox

# uv (from nox[uv], scripts/test.sh) makes and fills a virtualenv in seconds
# where pip took 25-50 s; plain venv and pip without it. uv reads no pip
# configuration: it installs from PyPI (the same versions as pip here) and
# must use the interpreters found on PATH, never download one.
nox.options.default_venv_backend = "uv|venv"
os.environ.setdefault("UV_PYTHON_DOWNLOADS", "never")
# Neither pip (--no-compile) nor uv byte-compiles on install: each module is
# compiled when first imported, and the .pyc kept. With PYTHONDONTWRITEBYTECODE
# inherited from the environment, none would be kept, and every pytest worker
# and every spawned child of the concurrency tests (hundreds a run) would
# compile Django and the rest again: 0.3 s an import of Django, DRF and
# Hypothesis with .pyc files, 0.9 s without.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
nox.options.error_on_missing_interpreters = True
nox.options.reuse_existing_virtualenvs = True

# (Python, Django) and the databases each pair runs on: the LTS on the oldest
# Python we support, the newest on a newer one. MariaDB on one pair only: the
# SQL written for it does not depend on the Python or Django version.
# The first pair's servers' cells go first, beside the second pair's SQLite
# cell in the other lane (LANES): one waits on a server while the other
# needs a core.
MATRIX = {
    ("3.11", "5.2"): ["postgres", "mariadb", "sqlite", "generic"],
    # PostgreSQL with server-side parameters and prepared statements, the
    # generic dialect on SQLite (the plain ORM on a one-writer database), and
    # PostgreSQL with encryption at rest on.
    ("3.12", "6.1"): ["sqlite", "postgres-prepared", "generic-sqlite", "postgres-encrypted"],
    # The other Python and Django the classifiers name: a smoke cell, on
    # SQLite (what it adds is the versions). Every test once but those the
    # other pairs run on the same SQLite and whose outcome depends on the
    # database rather than the versions (VERSIONS_ONLY): the reliability
    # suite's search for races and interleavings, and the concurrency
    # races; and the browser tests, which drive the admin of Django 5.2 and
    # 6.1 in the other pairs.
    ("3.13", "6.0"): ["sqlite"],
}
VERSIONS_ONLY = {
    # The reliability suite runs on SQLite in the first pair and under Django
    # 6.1 in this pair's encrypted cell: its SQLite cell adds neither.
    ("3.12", "6.1"): ["--ignore=tests/reliability"],
    ("3.13", "6.0"): [
        "--ignore=tests/reliability",
        "--ignore=tests/test_concurrency.py",
        "--ignore=tests/test_scope_concurrency.py",
        "-m",
        "not browser",
    ],
}
# ``make test`` runs two lanes at once (scripts/test.sh: ``nox -t first`` and
# ``nox -t second``): the cells of one pair wait on a database server much of
# the time, and the other lane's work takes those cores. The first pair's
# cells in one; the checks and the other pairs' cells in the other, about
# as long. Each pair has test databases of its own.
LANES = {("3.11", "5.2"): "first", ("3.12", "6.1"): "second", ("3.13", "6.0"): "second"}
DATABASES = ["sqlite", "postgres"]

# The reliability suite's size per pair (tests/reliability/budget.py). The
# first pair searches at the CI size on the servers; the second runs it in
# its encrypted cell, with fewer hypothesis examples and raced sessions
# ("smoke"): what it adds is Python and Django versions (and encryption),
# which need every code path run, not the same database search again.
# ANVIA_RELIABILITY in the environment wins.
RELIABILITY = {("3.12", "6.1"): "smoke", ("3.13", "6.0"): "smoke"}
# SQLite runs one writer at a time: the CI size's longer search for races
# and interleavings is the servers' (PostgreSQL, MariaDB); SQLite's cells
# run every rule, invariant and race at the smoke size.
SMOKE_DATABASES = {"sqlite", "generic-sqlite"}

# Server-side binding and prepared statements change how every statement
# is sent, not what the app does with its rows: the 3.12 pair runs them on
# the tests of the SQL the app sends (hand-written, compiled, grouped,
# searched, paged); the 3.11 pair runs the whole suite on PostgreSQL.
PREPARED_TESTS = [
    "tests/test_store.py",
    "tests/test_store_conformance.py",
    "tests/test_retried_append.py",
    "tests/test_concurrency.py",
    "tests/test_dialects.py",
    "tests/test_groups.py",
    "tests/test_one_engine.py",
    "tests/test_db_threads.py",
    "tests/test_reads_orm.py",
    "tests/test_listing_sql.py",
    "tests/test_search.py",
    "tests/test_api.py",
    "tests/test_api_paging.py",
    "tests/test_api_search.py",
    "tests/test_inspector.py",
    "tests/lifecycle",
    "tests/reliability/test_faults.py",
    "tests/integrations/test_adk_session_contract.py",
    "tests/integrations/test_langgraph_conformance.py",
]

# Encryption at rest on (ANVIA_TEST_ENCRYPTION=1: a test keyring for the
# whole run): the conformance and reliability suites, the encryption tests
# (which turn on the blind index and key aliases themselves; their browser
# test runs in the SQLite cells) and the integrations' sealed forms. The
# rest of the suite reads raw columns and counts statements of the plain
# path on purpose.
ENCRYPTED_TESTS = [
    "tests/test_store_conformance.py",
    "tests/reliability",
    "tests/encryption",
    "tests/integrations/test_pydantic_ai_stored_form.py",
    "tests/integrations/test_langgraph_conformance.py",
    "tests/integrations/test_langgraph_saver.py",
    "tests/integrations/test_langgraph_store.py",
    "tests/integrations/test_langgraph_deltas.py",
]

# The plain-ORM SQL dialect (what an unknown database gets), forced on
# PostgreSQL and on SQLite: the store's own tests, the concurrency and the
# reliability suites, and the one-engine tests.
GENERIC_DIALECT_TESTS = [
    "tests/test_store.py",
    "tests/test_store_conformance.py",
    "tests/test_retried_append.py",
    "tests/test_concurrency.py",
    "tests/test_scope_concurrency.py",
    "tests/reliability/test_faults.py",
    "tests/test_one_engine.py",
    "tests/integrations/test_adk_concurrency.py",
]


def install(session: nox.Session, *args: str) -> None:
    """``session.install`` without byte-compiling every installed module: pip
    spends about a quarter of a fresh install on that, and a run imports a
    fraction of them (Python compiles those on first import)."""
    flags = [] if session.venv_backend == "uv" else ["--no-compile"]
    session.install(*flags, *args)


@nox.session
@nox.parametrize("python,django", [nox.param(*pair, tags=[LANES[pair]]) for pair in MATRIX])
def tests(session: nox.Session, django: str) -> None:
    """Every database of the pair in one virtualenv (one install, not one per
    database), two pytest workers each. ``ANVIA_TEST_DBS=postgres,mariadb``
    picks some of them; other arguments go to pytest."""
    python = str(session.python)
    install(session, "-e", ".[dev]", f"django~={django}.0")
    session.run("python", "-m", "django", "--version")
    chosen = os.environ.get("ANVIA_TEST_DBS")
    budget = os.environ.get("ANVIA_RELIABILITY") or RELIABILITY.get((python, django), "")
    for db in MATRIX[(python, django)]:
        if chosen and db not in chosen.split(","):
            continue
        size = budget or ("smoke" if db in SMOKE_DATABASES else "")
        session.log(f"database: {db}" + (f" (reliability: {size})" if size else ""))
        started = time.monotonic()
        env = {"ANVIA_RELIABILITY": size, **test_database_names(python)}
        if db.startswith("generic"):
            backend = "sqlite" if db == "generic-sqlite" else "postgres"
            env |= {"ANVIA_TEST_DB": backend, "ANVIA_TEST_DIALECT": "generic"}
            session.run("pytest", "-n", "2", *GENERIC_DIALECT_TESTS, *session.posargs, env=env)
        elif db == "postgres-encrypted":
            env |= {"ANVIA_TEST_DB": "postgres", "ANVIA_TEST_ENCRYPTION": "1"}
            session.run("pytest", "-n", "2", *ENCRYPTED_TESTS, *session.posargs, env=env)
        elif db == "postgres-prepared":
            env |= {"ANVIA_TEST_DB": "postgres", "ANVIA_PG_PREPARED": "1"}
            session.run("pytest", "-n", "2", *PREPARED_TESTS, *session.posargs, env=env)
        else:
            env |= {"ANVIA_TEST_DB": db}
            skipped = VERSIONS_ONLY.get((python, django), [])
            session.run("pytest", "-n", "2", *skipped, *session.posargs, env=env)
        session.log(f"database: {db} took {time.monotonic() - started:.0f} s")


def test_database_names(python: str) -> dict[str, str]:
    """Test database names of the pair's own (``test_anvia_311``...), so the
    lanes' cells never share one; after ``ANVIA_PG_TEST_NAME`` and
    ``ANVIA_MYSQL_TEST_NAME`` where set."""
    suffix = python.replace(".", "")
    return {
        variable: f"{os.environ.get(variable, 'test_anvia')}_{suffix}"
        for variable in ("ANVIA_PG_TEST_NAME", "ANVIA_MYSQL_TEST_NAME")
    }


@nox.session(python="3.12", tags=["second"])
def lint(session: nox.Session) -> None:
    session.install("ruff~=0.17.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


MYPY = ["mypy", "anvia_django", "tests", "example_project", "scripts", "benchmarks"]


def _smoke_benchmark(session: nox.Session) -> None:
    output = session.create_tmp() + "/RESULTS.smoke.md"
    session.run("python", "-m", "benchmarks", "--smoke", "--backend", "all", "--output", output)


@nox.session(python="3.12", tags=["second"])
def typecheck_and_benchmarks(session: nox.Session) -> None:
    """mypy and the smoke benchmark run (so the harness cannot rot; the
    numbers are not judged) in one virtualenv, at the same time: mypy needs
    the bench extra anyway, a second install costs about a minute of CI, and
    mypy keeps one core busy while the benchmark mostly waits on databases."""
    install(session, "-e", ".[dev,bench]")
    assert session.bin is not None
    # mypy in the background, its output kept for after the benchmark's.
    with tempfile.TemporaryFile(mode="w+") as mypy_output:
        mypy = subprocess.Popen(
            [os.path.join(session.bin, MYPY[0]), *MYPY[1:]],
            stdout=mypy_output,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            _smoke_benchmark(session)
        finally:
            returncode = mypy.wait()
            mypy_output.seek(0)
            session.log(" ".join(MYPY))
            print(mypy_output.read(), end="", flush=True)
    if returncode:
        session.error(f"mypy failed (exit code {returncode})")


@nox.session(python="3.12", default=False)
def typecheck(session: nox.Session) -> None:
    """mypy alone (``make test`` runs it in typecheck_and_benchmarks)."""
    install(session, "-e", ".[dev,bench]")
    session.run(*MYPY)


@nox.session(python="3.12", default=False)
def benchmarks(session: nox.Session) -> None:
    """The smoke benchmark run alone (``make test`` runs it in typecheck_and_benchmarks)."""
    install(session, "-e", ".[bench]")
    _smoke_benchmark(session)


@nox.session(python="3.12", default=False)
@nox.parametrize("db", DATABASES)
def integrations_latest(session: nox.Session, db: str) -> None:
    """The integration tests against the newest openai-agents, langchain-core and pydantic-ai-slim.

    The dev extra pins the versions the suite was written against; this session
    upgrades them, so a protocol change shows up as a failing test here rather
    than as a user report. Not part of the default run (its result depends on
    what PyPI serves that day): ``nox -s integrations_latest``.
    """
    session.install("-e", ".[dev]")
    # pip notes that this breaks the dev extra's pins: that is the point.
    session.install("--upgrade", "openai-agents", "langchain-core", "pydantic-ai-slim")
    session.run(
        "python",
        "-c",
        "import agents, langchain_core, pydantic_ai;"
        " print(agents.__version__, langchain_core.__version__, pydantic_ai.__version__)",
    )
    session.run("pytest", "tests/integrations", *session.posargs, env={"ANVIA_TEST_DB": db})
