"""The "message text matches these words" condition, in each backend's SQL.

Migration 0007 builds the index each condition is written to use; the
expressions here must stay exactly the indexed ones (PostgreSQL matches an
expression index by its text). User input only ever reaches the database
as a bound parameter, and, for the FTS syntaxes of SQLite and MariaDB, as
words re-quoted here, so no operator a user types (``"``, ``*``, ``NEAR``,
``-``, ``+``, parentheses) is interpreted.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Lookup
from django.db.models.sql.compiler import SQLCompiler

from anvia_django.core.memory.search_text import SearchTerms

FTS_TABLE = "anvia_django_message_fts"
SEARCH_COLUMN = "anvia_search_text"
"""MariaDB/MySQL: the stored generated column the FULLTEXT index covers."""

MYSQL_MIN_WORD = 3
"""InnoDB's default ``innodb_ft_min_token_size``: shorter words are not indexed."""
MYSQL_STOP_WORDS = frozenset(
    [
        *("a", "about", "an", "are", "as", "at", "be", "by", "com", "de", "en", "for", "from"),
        *("how", "i", "in", "is", "it", "la", "of", "on", "or", "that", "the", "this", "to"),
        *("was", "what", "when", "where", "who", "will", "with", "und", "www"),
    ]
)
"""InnoDB's default stop words: never indexed, so a required one matches nothing."""

# SQLite without FTS5: the migration's text expression, scanned.
_SQLITE_TEXT = """CASE json_type({m}, '$.content')
  WHEN 'text' THEN json_extract({m}, '$.content')
  WHEN 'array' THEN (
    SELECT group_concat(json_extract(part.value, '$.text'), ' ')
    FROM json_each({m}, '$.content') AS part
    WHERE CASE WHEN part.type = 'object' THEN json_type(part.value, '$.text') = 'text' END
  )
END"""


_FTS5: dict[str, bool] = {}
"""Whether the SQLite library behind each alias has FTS5, learnt once."""


def sqlite_has_fts5(connection: BaseDatabaseWrapper) -> bool:
    """Whether the SQLite library of ``connection`` (an SQLite alias) has FTS5.

    Asked once per alias, on Django's own connection at the driver level,
    as Django sets up a new connection: a capability, not a query, so it is
    not among the statements a test counts."""
    found = _FTS5.get(connection.alias)
    if found is None:
        connection.ensure_connection()
        raw: Any = connection.connection
        row = raw.execute("SELECT sqlite_compileoption_used('ENABLE_FTS5')").fetchone()
        found = _FTS5[connection.alias] = bool(row[0])
    return found


def can_match(terms: SearchTerms, connection: BaseDatabaseWrapper) -> bool:
    """Whether any row could match, so a search without hope skips its query."""
    if connection.vendor == "mysql":
        return bool(_mysql_words(terms))
    return bool(terms.words)


def condition(
    connection: BaseDatabaseWrapper, table: str, terms: SearchTerms
) -> tuple[str, list[Any]]:
    """SQL true for rows of the messages table (``table``: its quoted alias)
    whose text holds every word of ``terms``."""
    qn = connection.ops.quote_name
    vendor = connection.vendor
    if not can_match(terms, connection):
        # An empty FTS5 or boolean-mode query is a syntax error, not "nothing".
        return "1 = 0", []
    if terms.alternatives:
        return _alternatives_condition(connection, table, terms.alternatives)
    if vendor == "postgresql":
        return (
            "to_tsvector('simple'::regconfig, coalesce(anvia_django_message_text("
            f"{table}.{qn('message')}), '')) @@ plainto_tsquery('simple'::regconfig, %s)",
            [terms.text],
        )
    if vendor == "mysql":
        query = " ".join(f'+"{word}"' for word in _mysql_words(terms))
        return f"MATCH ({table}.{qn(SEARCH_COLUMN)}) AGAINST (%s IN BOOLEAN MODE)", [query]
    if vendor == "sqlite" and sqlite_has_fts5(connection):
        # Each word a quoted FTS5 string: no bareword is read as an operator.
        query = " ".join('"' + word.replace('"', '""') + '"' for word in terms.words)
        return (
            f"{table}.{qn('id')} IN (SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s)",
            [query],
        )
    return _scan_condition(connection, table, terms)


def _alternatives_condition(
    connection: BaseDatabaseWrapper, table: str, alternatives: tuple[tuple[str, ...], ...]
) -> tuple[str, list[Any]]:
    """Rows holding one of each group of blind index tokens (hex: no
    character of any query syntax), through the same index as a word search."""
    qn = connection.ops.quote_name
    vendor = connection.vendor
    if vendor == "postgresql":
        query = " & ".join("(" + " | ".join(group) + ")" for group in alternatives)
        return (
            "to_tsvector('simple'::regconfig, coalesce(anvia_django_message_text("
            f"{table}.{qn('message')}), '')) @@ to_tsquery('simple'::regconfig, %s)",
            [query],
        )
    if vendor == "mysql":
        query = " ".join("+(" + " ".join(group) + ")" for group in alternatives)
        return f"MATCH ({table}.{qn(SEARCH_COLUMN)}) AGAINST (%s IN BOOLEAN MODE)", [query]
    if vendor == "sqlite" and sqlite_has_fts5(connection):
        query = " AND ".join(
            "(" + " OR ".join(f'"{token}"' for token in group) + ")" for group in alternatives
        )
        return (
            f"{table}.{qn('id')} IN (SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s)",
            [query],
        )
    column = f"{table}.{qn('message')}"
    like = f"{column} LIKE %s"
    clauses = ["(" + " OR ".join([like] * len(group)) + ")" for group in alternatives]
    return " AND ".join(clauses), [f"%{token}%" for group in alternatives for token in group]


def _mysql_words(terms: SearchTerms) -> list[str]:
    return [w for w in terms.words if len(w) >= MYSQL_MIN_WORD and w not in MYSQL_STOP_WORDS]


def _scan_condition(
    connection: BaseDatabaseWrapper, table: str, terms: SearchTerms
) -> tuple[str, list[Any]]:
    """No index: every word as a substring of the text (SQLite's) or of the
    JSON (any other backend: there keys and values alike match)."""
    column = f"{table}.{connection.ops.quote_name('message')}"
    text = _SQLITE_TEXT.format(m=column) if connection.vendor == "sqlite" else column
    like = f"({text}) LIKE %s ESCAPE '\\'"
    params = [
        "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        for word in terms.words
    ]
    return " AND ".join([like] * len(params)), params


class MatchesText(Lookup):
    """``MatchesText(F("pk"), terms)`` as a filter of a messages queryset.

    A lookup, not a boolean ``RawSQL``: Django compares a raw boolean with
    TRUE on MySQL, and ``MATCH ... AGAINST`` then means something else.
    """

    lookup_name = "anvia_matches_text"
    prepare_rhs = False

    def as_sql(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper) -> tuple[str, Any]:
        return condition(connection, _quoted_alias(compiler, self.lhs.alias), self.rhs)


def _quoted_alias(compiler: SQLCompiler, alias: str) -> str:
    """The table alias as the compiler writes it. Django 6.1 renamed
    ``quote_name_unless_alias`` to ``quote_name`` (the old name warns)."""
    quote = getattr(compiler, "quote_name", None) or compiler.quote_name_unless_alias
    quoted: str = quote(alias)
    return quoted
