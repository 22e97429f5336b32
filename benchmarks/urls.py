"""The inspector API mounted as the docs say, when it is available."""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from django.urls import include, path

urlpatterns: list[Any] = []
# The inspector API may not have landed on this branch yet.
with suppress(ImportError):
    urlpatterns.append(path("anvia/", include("anvia_django.urls")))
