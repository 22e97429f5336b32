"""The ``ANVIA_DJANGO`` settings object follows changes to the setting."""

from __future__ import annotations

from django.test import override_settings

from anvia_django.conf import DEFAULTS, app_settings

DEFAULT_THREADS = DEFAULTS["STORE_THREADS"]


def test_a_changed_setting_is_read_at_the_next_access() -> None:
    assert app_settings.STORE_THREADS == DEFAULT_THREADS
    with override_settings(ANVIA_DJANGO={"STORE_THREADS": 3}):
        assert app_settings.STORE_THREADS == 3
        with override_settings(ANVIA_DJANGO={"STORE_THREADS": 5}):
            assert app_settings.STORE_THREADS == 5
        assert app_settings.STORE_THREADS == 3
    assert app_settings.STORE_THREADS == DEFAULT_THREADS
