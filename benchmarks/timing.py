"""Repeated, interleaved timings and the rows of the results table."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

Run = Callable[[], Awaitable[None]]


@dataclass
class Row:
    workload: str
    what: str
    ops: int
    """Store calls (or requests) per measurement."""
    store_s: float
    """Median seconds for all ``ops`` through the store."""
    baseline_s: float | None
    repeats: int
    target: float | None = None
    """Largest acceptable ``ratio``; ``None`` when the row only informs."""
    baseline: str = "raw driver"
    unit: str = "s"
    peers: dict[str, float] = field(default_factory=dict)
    """Median seconds of each peer library on the same workload, same run."""
    failed: dict[str, str] = field(default_factory=dict)
    """Peers that failed on this workload, with their error; not in ``peers``."""
    peer_repeats: dict[str, int] = field(default_factory=dict)
    """Peers measured over fewer repeats than ``repeats``, and how many."""

    @property
    def ratio(self) -> float | None:
        if self.baseline_s is None or self.baseline_s <= 0:
            return None
        return self.store_s / self.baseline_s

    def peer_ratio(self, name: str) -> float | None:
        if self.baseline_s is None or self.baseline_s <= 0 or name not in self.peers:
            return None
        return self.peers[name] / self.baseline_s

    @property
    def met(self) -> bool | None:
        ratio = self.ratio
        if self.target is None or ratio is None:
            return None
        return ratio <= self.target

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Row:
        return cls(**data)


async def measure(
    store: Run, baseline: Run | None, repeats: int, setup: Callable[[], None] | None = None
) -> tuple[float, float | None]:
    """Median wall time of ``store`` and ``baseline``, interleaved.

    The two alternate which goes first, so drift on a shared machine (another
    engineer's test run starting) lands on both sides alike. A full garbage
    collection before each timed call makes each side pay for the
    collections its own allocations trigger, not for the other side's: left
    to chance, they moved the SQLite 1,000-message load between 1.0x and 1.6x.
    """
    store_times: list[float] = []
    baseline_times: list[float] = []
    for repeat in range(repeats):
        pairs: list[tuple[Run, list[float]]] = [(store, store_times)]
        if baseline is not None:
            pairs.append((baseline, baseline_times))
        if repeat % 2:
            pairs.reverse()
        for fn, times in pairs:
            if setup is not None:
                setup()
            gc.collect()
            started = time.perf_counter()
            await fn()
            times.append(time.perf_counter() - started)
    return (
        statistics.median(store_times),
        statistics.median(baseline_times) if baseline_times else None,
    )
