"""Figures for RELIABILITY.md, written as the tests run.

With ``ANVIA_RELIABILITY_REPORT=<path>`` set, each reliability test adds
its counts (operations run, processes used, faults injected, inputs tried,
anomalies found) to a JSON file, keyed by database backend and section.
``scripts/reliability_report.py`` runs the suite on every backend and turns
those files into the figures in RELIABILITY.md. Without the variable this
module does nothing.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

from django.db import connection

REPORT_VARIABLE = "ANVIA_RELIABILITY_REPORT"


def record(section: str, **counts: int) -> None:
    """Add ``counts`` to ``section`` for the current backend (summing)."""
    target = os.environ.get(REPORT_VARIABLE)
    if not target:
        return
    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        text = handle.read()
        data: dict[str, Any] = json.loads(text) if text.strip() else {}
        figures = data.setdefault(connection.vendor, {}).setdefault(section, {})
        for name, value in counts.items():
            figures[name] = figures.get(name, 0) + value
        handle.seek(0)
        handle.truncate()
        json.dump(data, handle, indent=2, sort_keys=True)
