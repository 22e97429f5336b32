"""The collation of this app's id and text columns, by vendor: what makes
them compare byte for byte everywhere (see ``anvia_django.fields``)."""

from __future__ import annotations

from typing import Any, cast


def exact_collation(connection: Any) -> str | None:
    """The collation of this app's id and text columns on ``connection``;
    ``None``: the database's own, which is exact already (PostgreSQL, SQLite).

    On MySQL and MariaDB: binary and NO PAD, so ids compare byte for byte
    (``"a" != "A" != "a "``), and ``utf8mb4`` whatever the table's default.
    """
    if connection.vendor != "mysql":
        return None
    if getattr(connection, "mysql_is_mariadb", False):
        return "utf8mb4_nopad_bin"
    version = cast(tuple[int, ...], getattr(connection, "mysql_version", (0,)))
    return "utf8mb4_0900_bin" if version >= (8, 0, 17) else "utf8mb4_bin"
