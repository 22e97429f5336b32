"""``anvia_memory usage``: tokens per user over a date range, from the run records."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta

from django.core.management.base import OutputWrapper

from anvia_django.core.memory.run_records import RunTotals
from anvia_django.persistence import usage_by_user

from .transcript import terminal_safe

_COLUMNS = ("user", "runs", "failed", "input", "output", "total")


def parse_moment(text: str, *, end_of_day: bool) -> datetime:
    """An ISO 8601 date or date-time; naive values are UTC.

    A bare date means the start of that day, or, with ``end_of_day`` (for
    ``--until``), the start of the next, so the day itself is included.
    """
    try:
        day = date.fromisoformat(text)
    except ValueError:
        pass
    else:
        start = datetime.combine(day, time.min, tzinfo=UTC)
        if not end_of_day:
            return start
        try:
            return start + timedelta(days=1)
        except OverflowError:
            raise ValueError(f"{text!r} is the last day a date can name; leave it out") from None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{text!r} is not an ISO 8601 date or date-time (2026-12-01, 2026-12-01T09:30)"
        ) from None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    try:
        # Stored times are UTC: one outside UTC's calendar compares with none.
        return moment.astimezone(UTC)
    except OverflowError:
        raise ValueError(
            f"{text!r} falls outside the years 1 to 9999 in UTC; give a nearer time"
        ) from None


def print_usage(
    out: OutputWrapper,
    *,
    user_id: str | None,
    since: datetime | None,
    until: datetime | None,
) -> None:
    rows = usage_by_user(user_id=user_id, since=since, until=until)
    if not rows:
        out.write("No runs in that range.")
        return
    table = [_COLUMNS] + [_cells(terminal_safe(user or "(no user)"), t) for user, t in rows]
    if len(rows) > 1:
        table.append(_cells("all users", _sum(t for _, t in rows)))
    widths = [max(len(row[i]) for row in table) for i in range(len(_COLUMNS))]
    for row in table:
        first, *numbers = row
        line = [first.ljust(widths[0])] + [
            n.rjust(w) for n, w in zip(numbers, widths[1:], strict=True)
        ]
        out.write("  ".join(line).rstrip())


def _cells(user: str, totals: RunTotals) -> tuple[str, ...]:
    return (
        user,
        str(totals.runs),
        str(totals.failed_runs),
        str(totals.input_tokens),
        str(totals.output_tokens),
        str(totals.total_tokens),
    )


def _sum(all_totals: Iterable[RunTotals]) -> RunTotals:
    result = RunTotals()
    for totals in all_totals:
        result = RunTotals(
            result.runs + totals.runs,
            result.failed_runs + totals.failed_runs,
            result.input_tokens + totals.input_tokens,
            result.output_tokens + totals.output_tokens,
            result.total_tokens + totals.total_tokens,
        )
    return result
