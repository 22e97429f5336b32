"""The inspector API's throttle: ``ANVIA_DJANGO["INSPECTOR_THROTTLE_RATE"]``.

Set on the views themselves, like every other policy of the inspector, so
it holds whatever the project's ``REST_FRAMEWORK`` throttling says. A
caller is its user, or its address when anonymous (DRF's
``UserRateThrottle``; behind proxies set ``REST_FRAMEWORK["NUM_PROXIES"]``).
"""

from __future__ import annotations

import re

from rest_framework.throttling import UserRateThrottle

from anvia_django.conf import app_settings

RATE = re.compile(r"[1-9][0-9]{0,8}/(second|minute|hour|day|[smhd])")
"""A rate as DRF reads it (the period by its first letter), spelled as the docs do."""


def is_rate(value: object) -> bool:
    return value is None or (isinstance(value, str) and RATE.fullmatch(value) is not None)


class InspectorRateThrottle(UserRateThrottle):
    """At most ``INSPECTOR_THROTTLE_RATE`` requests per caller; then 429
    with a ``Retry-After`` header."""

    scope = "anvia_inspector"

    def get_rate(self) -> str | None:
        # Read per request, so override_settings and a settings change apply.
        return app_settings.INSPECTOR_THROTTLE_RATE
