"""``python -m benchmarks``: run the workloads and write the results table.

Each backend runs in its own process (Django is configured once per
process); the parent merges their rows into one markdown report.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

BACKENDS = ("sqlite", "postgres", "mariadb")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--backend", choices=[*BACKENDS, "all"], default="all")
    parser.add_argument("--quick", action="store_true", help="small sizes, 3 repeats")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny sizes, one repeat, no figures to read (CI)"
    )
    parser.add_argument(
        "--output", type=Path, default=None, help="write the markdown report here too"
    )
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated workloads to run (e.g. W1,W4); default all",
    )
    parser.add_argument(
        "--profile",
        default=None,
        metavar="WORKLOAD",
        help="profile the store side of one workload (W1, W3, W4 or W5) with pyinstrument",
    )
    parser.add_argument(
        "--no-peers", action="store_true", help="skip the peer libraries (store and raw only)"
    )
    parser.add_argument("--child-json", type=Path, default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child_json is not None or args.profile is not None:
        from .run import run_backend

        return run_backend(args)
    from .report import render

    backends = BACKENDS if args.backend == "all" else (args.backend,)
    shown = " ".join(["python", "-m", "benchmarks", *(argv if argv is not None else sys.argv[1:])])
    results = []
    crashed: dict[str, str] = {}
    status = 0
    for backend in backends:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "rows.json"
            command = [sys.executable, "-m", "benchmarks", "--child-json", str(out)]
            if args.quick:
                command.append("--quick")
            if args.smoke:
                command.append("--smoke")
            if args.only:
                command += ["--only", args.only]
            if args.no_peers:
                command.append("--no-peers")
            env = {**os.environ, "ANVIA_BENCH_DB": backend}
            print(f"== {backend} ==", file=sys.stderr, flush=True)
            done = subprocess.run(command, env=env, check=False)
            # A failed backend leaves the others' results to report: the
            # child writes what it finished, the exit status says it failed.
            if done.returncode != 0:
                print(f"{backend}: the benchmark process failed", file=sys.stderr)
                status = status or done.returncode
            if out.exists():
                results.append(json.loads(out.read_text()))
            else:
                crashed[backend] = f"its process exited with status {done.returncode}"
        text = render(results, shown, crashed)
        # Rewritten after each backend: a run stopped in the next one keeps these.
        if args.output is not None:
            args.output.write_text(text)
    print(text)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
