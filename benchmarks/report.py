"""The markdown report: machine, command, table, misses, query plans."""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import django

from .timing import Row

ANALYSIS = Path(__file__).with_name("analysis.md")


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores ({cpu}), {platform.system()} {platform.release()}"


def _ms(seconds: float, ops: int) -> str:
    return f"{seconds / ops * 1000:.3f}"


def _load(averages: list[float]) -> str:
    return "/".join(f"{value:.2f}" for value in averages)


def _took(result: dict[str, Any]) -> str:
    seconds = result.get("seconds")
    return "" if seconds is None else f" ({seconds / 60:.1f} min)"


def _value(row: Row, value: float) -> str:
    """Per-call milliseconds, or for memory rows the whole peak in MiB."""
    if row.unit == "bytes":
        return f"{value / 2**20:.2f} MiB peak"
    if row.unit == "x":
        return f"{value:.2f}"
    return _ms(value, row.ops)


def render(
    results: list[dict[str, Any]], command: str, crashed: dict[str, str] | None = None
) -> str:
    """``crashed``: backends whose process ended without results, with why."""
    crashed = crashed or {}
    lines = [
        "# anvia-django benchmarks",
        "",
        f"- Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        f"- Machine: {machine()}",
        f"- Python {platform.python_version()}, Django {django.get_version()}",
        "- Databases: " + ", ".join(f"{r['server']} (baseline: {r['baseline']})" for r in results),
        f"- Command: `{command}`",
        *[
            f"- Load average (1/5/15 min) during the {r['backend']} run{_took(r)}:"
            f" {_load(r['load'][0])} at the start, {_load(r['load'][1])} at the end"
            for r in results
            if r.get("load")
        ],
        "",
        "Times are medians over the repeats, per call in milliseconds. The ratio is the",
        "store's median over the raw-driver baseline's, measured interleaved in the same run;",
        "ratios, not absolute times, are what to compare across runs (shared, noisy machine).",
        "W7 rows are tracemalloc peaks (MiB) of one pass, long conversation over short.",
        "",
        "| backend | workload | what | calls | repeats | store ms/call | baseline ms/call"
        " | ratio | target | met |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|:---:|",
    ]
    misses: list[str] = []
    for result in results:
        for data in result["rows"]:
            row = Row.from_dict(data)
            base = "" if row.baseline_s is None else _value(row, row.baseline_s)
            ratio = "" if row.ratio is None else f"{row.ratio:.2f}x"
            target = "" if row.target is None else f"<= {row.target:g}x"
            met = {True: "yes", False: "**no**", None: ""}[row.met]
            baseline_name = "" if row.baseline == "raw driver" else f" (vs {row.baseline})"
            lines.append(
                f"| {result['backend']} | {row.workload} | {row.what}{baseline_name} | {row.ops:,}"
                f" | {row.repeats} | {_value(row, row.store_s)} | {base} | {ratio}"
                f" | {target} | {met} |"
            )
            if row.met is False and row.ratio is not None and row.target is not None:
                misses.append(
                    f"- {result['backend']} {row.workload} {row.what}: {row.ratio:.2f}x against"
                    f" a target of {row.target:g}x ({row.ratio / row.target - 1:+.0%})."
                )
    lines.append("")
    lines += peers_table(results)
    lines += ["## Failures in this run", ""]
    lines += failures(results, crashed) or ["None."]
    lines += ["", "## Targets missed in this run", ""]
    lines += misses or ["None."]
    lines += notes(results)
    # Results only: what was measured on the way to a change is analysis.md's.
    lines += ["", f"Experiments and before/after pairs: `benchmarks/{ANALYSIS.name}`."]
    for result in results:
        if not result["plans"]:
            continue
        lines += ["", f"## Query plans, {result['server']} (W5 data, largest size)", ""]
        for what, sql, plan in result["plans"]:
            lines += [f"**{what}**", "", "```sql", sql, "```", "", "```", plan, "```", ""]
    return "\n".join(lines).rstrip() + "\n"


def failures(results: list[dict[str, Any]], crashed: dict[str, str]) -> list[str]:
    """Backends and workloads that did not finish, and peers that failed.

    A peer's error is listed once with the workloads it ended; the W9
    speed-up row is left out, as it fails with W1 or W2.
    """
    lines = [f"- {backend}: no results ({why})." for backend, why in crashed.items()]
    for result in results:
        lines += [f"- {result['backend']}: {error}" for error in result.get("errors", [])]
        ended: dict[tuple[str, str], list[str]] = {}
        for data in result["rows"]:
            row = Row.from_dict(data)
            if row.unit == "x":
                continue
            for peer, error in row.failed.items():
                workloads = ended.setdefault((peer, error), [])
                if row.workload not in workloads:
                    workloads.append(row.workload)
        lines += [
            f"- {result['backend']} {', '.join(workloads)}: {peer} failed ({error})."
            for (peer, error), workloads in ended.items()
        ]
    return lines


def notes(results: list[dict[str, Any]]) -> list[str]:
    """Each backend's notes once, naming the backends when not all gave it."""
    given: dict[str, list[str]] = {}
    for result in results:
        for note in result["notes"]:
            given.setdefault(note, []).append(result["backend"])
    if not given:
        return []
    lines = ["", "## Notes", ""]
    for note, backends in given.items():
        where = "" if len(backends) == len(results) else f" ({', '.join(backends)})"
        lines.append(f"- {note}{where}")
    return lines


def _peer_cell(row: Row, name: str, value: float | None) -> str:
    if name in row.failed:
        return "failed"
    if value is None:
        return "-"
    fewer = row.peer_repeats.get(name)
    return f"{value:.2f}x" + ("" if fewer is None else f" ({fewer})")


def peers_table(results: list[dict[str, Any]]) -> list[str]:
    """The store beside the peer libraries: each one's ratio to the raw driver."""
    rows = [(r["backend"], Row.from_dict(d)) for r in results for d in r["rows"]]
    rows = [(backend, row) for backend, row in rows if row.peers or row.failed]
    if not rows:
        return []
    names: list[str] = []
    for _, row in rows:
        names += [name for name in [*row.peers, *row.failed] if name not in names]
    # The store's other configurations are shown beside the peers, not judged as one.
    own = [name for name in names if name.startswith("anvia-django")]
    verdicts = ["store <= fastest peer", *(f"{name} <= fastest peer" for name in own)]
    lines = [
        "## Beside the peers",
        "",
        "Each library through its own public API, on the same workload, interleaved with the",
        "store and the raw driver in the same run: median time over the raw driver's (lower is",
        "better; `-` where a library does not support the backend, `failed` where it raised or",
        "stored the wrong messages: see the failures below). W9's row is each one's own time",
        "at 16 tasks over its time at 1 task (lower is more speed-up from concurrency).",
        "A number in brackets is a peer's repeats where it ran fewer than the store: one more",
        "than 3x the store's time in a workload's first repeat runs fewer of them.",
        "",
        "| backend | workload | what | anvia-django | raw driver | "
        + " | ".join([*names, *verdicts])
        + " |",
        "|---|---|---|---:|---:|" + "---:|" * len(names) + ":---:|" * len(verdicts),
    ]
    for backend, row in rows:
        if row.unit == "x":
            store, raw = row.store_s, row.baseline_s or 0.0
            peers = {name: row.peers.get(name) for name in names}
        else:
            store, raw = row.ratio or 0.0, 1.0
            peers = {name: row.peer_ratio(name) for name in names}
        shown = [_peer_cell(row, name, value) for name, value in peers.items()]
        others = [v for name, v in peers.items() if v is not None and name not in own]
        fastest = min(others, default=None)
        mine = [store, *(peers[name] for name in own)]
        met = [
            "" if fastest is None or value is None else ("yes" if value <= fastest else "**no**")
            for value in mine
        ]
        lines.append(
            f"| {backend} | {row.workload} | {row.what} | {store:.2f}x | {raw:.2f}x | "
            + " | ".join([*shown, *met])
            + " |"
        )
    return [*lines, ""]
