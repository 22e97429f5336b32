"""The inspector API mounted as the docs say."""

from __future__ import annotations

from django.urls import include, path

urlpatterns = [path("anvia/", include("anvia_django.urls"))]
