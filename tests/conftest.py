from __future__ import annotations

import pytest
from django.db import connection


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
