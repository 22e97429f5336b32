"""How hard the reliability suite pushes: a CI-sized default, a long local
mode and a smoke size.

``ANVIA_RELIABILITY=long`` runs more hypothesis examples, longer operation
sequences and more appends per writer. ``ANVIA_RELIABILITY=smoke`` runs
fewer examples and appends (never fewer steps per sequence): every rule,
invariant and race still runs, with less search. The noxfile gives it to the
second (Python, Django) pair, whose other cells already run the CI size on
the same databases. Anything else is the CI size.
"""

from __future__ import annotations

import os


def level() -> str:
    """``"long"``, ``"smoke"`` or ``"ci"``."""
    value = os.environ.get("ANVIA_RELIABILITY", "").lower()
    return value if value in ("long", "smoke") else "ci"


def is_long() -> bool:
    return level() == "long"


def scaled(ci: int, long: int, smoke: int | None = None) -> int:
    """``ci`` in CI, ``long`` in the long local mode, ``smoke`` (default
    ``ci``) in the smoke size."""
    chosen = level()
    if chosen == "long":
        return long
    if chosen == "smoke" and smoke is not None:
        return smoke
    return ci
