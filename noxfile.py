"""The test matrix: Python x Django x database, plus lint and type checks.

``make test`` (scripts/test.sh) runs every session; ``nox -l`` lists them.
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "venv"
nox.options.error_on_missing_interpreters = True
nox.options.reuse_existing_virtualenvs = True

# (Python, Django): the LTS on the oldest Python we support, the newest on a newer one.
MATRIX = [("3.11", "5.2"), ("3.12", "6.1")]
DATABASES = ["sqlite", "postgres"]
# MariaDB on one pair only, to keep CI time down: the SQL written for it
# does not depend on the Python or Django version.
CELLS = [
    (python, django, db)
    for python, django in MATRIX
    for db in [*DATABASES, *(["mariadb"] if (python, django) == ("3.11", "5.2") else [])]
]


@nox.session
@nox.parametrize("python,django,db", CELLS)
def tests(session: nox.Session, django: str, db: str) -> None:
    session.install("-e", ".[dev]", f"django~={django}.0")
    session.run("python", "-m", "django", "--version")
    session.run(
        "pytest",
        *session.posargs,
        env={"ANVIA_TEST_DB": db},
    )


@nox.session(python="3.11")
def generic_dialect(session: nox.Session) -> None:
    """The plain-ORM SQL dialect (what an unknown database gets) on PostgreSQL:
    the store's own tests, the concurrency and the reliability suites."""
    session.install("-e", ".[dev]", "django~=5.2.0")
    session.run(
        "pytest",
        "tests/test_store.py",
        "tests/test_store_conformance.py",
        "tests/test_retried_append.py",
        "tests/test_concurrency.py",
        "tests/reliability/test_faults.py",
        *session.posargs,
        env={"ANVIA_TEST_DB": "postgres", "ANVIA_TEST_DIALECT": "generic"},
    )


@nox.session(python="3.12")
def lint(session: nox.Session) -> None:
    session.install("ruff~=0.17.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python="3.12")
def typecheck(session: nox.Session) -> None:
    session.install("-e", ".[dev,bench]")
    session.run("mypy", "anvia_django", "tests", "example_project", "scripts", "benchmarks")


@nox.session(python="3.12")
def benchmarks(session: nox.Session) -> None:
    """The quick benchmark run, so the harness cannot rot; the numbers are not judged."""
    session.install("-e", ".[bench]")
    output = session.create_tmp() + "/RESULTS.quick.md"
    session.run("python", "-m", "benchmarks", "--quick", "--backend", "all", "--output", output)


@nox.session(python="3.12", default=False)
@nox.parametrize("db", DATABASES)
def integrations_latest(session: nox.Session, db: str) -> None:
    """The integration tests against the newest openai-agents and langchain-core.

    The dev extra pins the versions the suite was written against; this session
    upgrades both, so a protocol change shows up as a failing test here rather
    than as a user report. Not part of the default run (its result depends on
    what PyPI serves that day): ``nox -s integrations_latest``.
    """
    session.install("-e", ".[dev]")
    # pip notes that this breaks the dev extra's pins: that is the point.
    session.install("--upgrade", "openai-agents", "langchain-core")
    session.run(
        "python",
        "-c",
        "import agents, langchain_core; print(agents.__version__, langchain_core.__version__)",
    )
    session.run("pytest", "tests/integrations", *session.posargs, env={"ANVIA_TEST_DB": db})
