"""One backend's run, in its own process: fresh database, workloads, plans."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import django

TARGETS = {
    # workload -> (postgres and mariadb, sqlite) largest acceptable ratio
    "W1": (1.3, 2.0),
    "W2": (1.5, 2.0),
    "W3": (1.3, 2.0),
    "W4": (1.3, 1.3),
    "W5": (2.0, 2.0),
}
SCALING_TARGET = 1.5
SPEED_UP_TARGET = 1.25
"""W9 on PostgreSQL: the store keeps at least 80% of the raw driver's speed-up."""


def setup_django(backend: str | None) -> None:
    if backend in ("sqlite", "postgres", "mariadb"):
        os.environ["ANVIA_BENCH_DB"] = backend
    os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.settings"
    django.setup()


def run_backend(args: argparse.Namespace) -> int:
    setup_django(args.backend if args.backend != "all" or args.profile else None)
    from django.conf import settings

    from .database import create_fresh_database, server_version

    create_fresh_database()
    if args.profile is not None:
        from .profiling import profile

        print(profile(args.profile, quick=args.quick))
        return 0
    load_before = os.getloadavg()
    started = time.monotonic()
    result = asyncio.run(_run(args))
    result["seconds"] = time.monotonic() - started
    result["load"] = [load_before, os.getloadavg()]
    result["backend"] = settings.BACKEND
    result["server"] = server_version()
    args.child_json.write_text(json.dumps(result))
    return 1 if result["errors"] else 0


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    from django.conf import settings

    from anvia_django.store import DjangoMemoryStore

    from . import workloads
    from .raw import make_baseline

    sizes = workloads.SMOKE if args.smoke else workloads.QUICK if args.quick else workloads.Sizes()
    only = {w.strip().upper() for w in args.only.split(",") if w.strip()}
    baseline = make_baseline()
    await baseline.open(sizes.concurrency)
    bench = workloads.Bench(
        DjangoMemoryStore(), baseline, sizes, no_peers=args.no_peers, only=frozenset(only)
    )
    steps = [
        ({"W1", "W2", "W3", "W8", "W9"}, workloads.appends),
        ({"W4"}, workloads.loads),
        ({"W5"}, workloads.lists),
        ({"W6"}, workloads.api),
        ({"W7"}, workloads.memory),
        ({"W10"}, workloads.jobs),
        ({"W11"}, workloads.search),
    ]
    rows = []
    plans: list[tuple[str, str, str]] = []
    errors: list[str] = []
    try:
        for names, step in steps:
            if only and not names & only:
                continue
            label = "/".join(sorted(names))
            print(f"   {label} ...", flush=True)
            started = time.monotonic()
            try:
                rows += [row for row in await step(bench) if not only or row.workload in only]
                if step is workloads.lists:
                    plans = await workloads.plans(bench)
            except Exception as error:
                # The other steps still run and every finished row is
                # reported; the run exits non-zero.
                traceback.print_exc(file=sys.stderr)
                first = str(error).strip().splitlines()
                errors.append(
                    f"{label} stopped: {type(error).__name__}" + (f": {first[0]}" if first else "")
                )
            print(f"   {label}: {time.monotonic() - started:.0f} s", flush=True)
    finally:
        await baseline.close()
    # MariaDB is held to the PostgreSQL targets: a server, pooled connections.
    pg = settings.BACKEND in ("postgres", "mariadb")
    for row in rows:
        if row.baseline.startswith("store at"):
            row.target = SCALING_TARGET
        elif row.unit == "x":
            row.target = SPEED_UP_TARGET if pg else None
        elif row.workload in TARGETS:
            row.target = TARGETS[row.workload][0 if pg else 1]
    return {
        "rows": [row.as_dict() for row in rows],
        "plans": plans,
        "notes": bench.notes,
        "errors": bench.errors + errors,
        "baseline": baseline.name,
        "sizes": vars(sizes) if hasattr(sizes, "__dict__") else {},
        "output": str(Path.cwd()),
    }
