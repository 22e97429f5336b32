"""Ages on the command line: ``30d``, ``12h``, ``2w``, ``90m``, ``45s``."""

from __future__ import annotations

import re
from datetime import timedelta

_AGE = re.compile(r"(?P<amount>\d+)\s*(?P<unit>[smhdw])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_age(text: str) -> timedelta:
    """A positive duration such as ``30d``; ``ValueError`` naming the format otherwise."""
    match = _AGE.fullmatch(text.strip().lower())
    if match is None:
        raise ValueError(
            f"{text!r} is not an age; use a whole number and a unit: s, m, h, d or w (e.g. 30d)."
        )
    amount = int(match["amount"])
    if amount == 0:
        raise ValueError("The age must be more than zero.")
    try:
        return timedelta(**{_UNITS[match["unit"]]: amount})
    except OverflowError:
        raise ValueError(f"{text!r} is too long an age.") from None
