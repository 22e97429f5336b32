"""Run the reliability suite on SQLite and PostgreSQL and refresh RELIABILITY.md.

    python scripts/reliability_report.py            # CI size
    ANVIA_RELIABILITY=long python scripts/reliability_report.py   # long mode

Each backend's run writes its counts to a JSON file (``ANVIA_RELIABILITY_REPORT``);
this script merges them and rewrites the figures between the markers in
RELIABILITY.md. PostgreSQL settings come from the usual ``ANVIA_PG_*`` variables.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOCUMENT = ROOT / "RELIABILITY.md"
BEGIN = "<!-- figures:begin -->"
END = "<!-- figures:end -->"
TESTS = [
    "tests/reliability",
    "tests/test_concurrency.py",
    "tests/test_bad_input.py",
]


def run_suite(backend: str, report: Path) -> int:
    env = {**os.environ, "ANVIA_RELIABILITY_REPORT": str(report), "ANVIA_TEST_DB": backend}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *TESTS]
    return subprocess.run(command, cwd=ROOT, env=env, check=False).returncode


def render(figures: dict[str, Any], outcome: dict[str, int], mode: str) -> str:
    lines = [
        BEGIN,
        f"Last run: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, mode `{mode}`, "
        + ", ".join(f"{b}: {'passed' if c == 0 else 'FAILED'}" for b, c in outcome.items())
        + ".",
        "",
        "| backend | section | figures |",
        "|---|---|---|",
    ]
    for backend in sorted(figures):
        for section in sorted(figures[backend]):
            values = ", ".join(f"{k} {v}" for k, v in sorted(figures[backend][section].items()))
            lines.append(f"| {backend} | {section} | {values} |")
    lines.append(END)
    return "\n".join(lines)


def main() -> int:
    mode = os.environ.get("ANVIA_RELIABILITY", "ci") or "ci"
    figures: dict[str, Any] = {}
    outcome: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as directory:
        for backend in ("sqlite", "postgres"):
            report = Path(directory) / f"{backend}.json"
            outcome[backend] = run_suite(backend, report)
            if report.exists():
                figures.update(json.loads(report.read_text()))
    text = DOCUMENT.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    DOCUMENT.write_text(text[:start] + render(figures, outcome, mode) + text[end:])
    return max(outcome.values())


if __name__ == "__main__":
    raise SystemExit(main())
