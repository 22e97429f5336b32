"""How hard the reliability suite pushes: a CI-sized default and a long local mode.

``ANVIA_RELIABILITY=long`` runs more hypothesis examples, longer operation
sequences and more appends per writer; anything else is the CI size.
"""

from __future__ import annotations

import os


def is_long() -> bool:
    return os.environ.get("ANVIA_RELIABILITY", "").lower() == "long"


def scaled(ci: int, long: int) -> int:
    """``ci`` in CI, ``long`` in the long local mode."""
    return long if is_long() else ci
