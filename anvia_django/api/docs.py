"""Swagger UI and ReDoc over the inspector's schema (needs the ``openapi``
extra).

With ``drf_spectacular_sidecar`` in ``INSTALLED_APPS`` (the package
``drf-spectacular-sidecar``, in the ``openapi`` extra) both pages load
their scripts from this site's static files, so they work offline; without
it they follow drf-spectacular's ``SWAGGER_UI_DIST`` / ``REDOC_DIST``
settings (a CDN by default).
"""

from __future__ import annotations

from django.apps import apps
from django.templatetags.static import static
from drf_spectacular.settings import spectacular_settings
from drf_spectacular.views import SpectacularRedocView, SpectacularSwaggerView

from .base import InspectorAccessMixin, ReadableErrorsMixin

SCHEMA_URL_NAME = "anvia_django:schema"
TITLE = "anvia-django inspector API"
_SIDECAR = "drf_spectacular_sidecar"


def sidecar_installed() -> bool:
    return apps.is_installed(_SIDECAR)


class InspectorSwaggerView(InspectorAccessMixin, ReadableErrorsMixin, SpectacularSwaggerView):
    url_name = SCHEMA_URL_NAME
    title = TITLE
    # The app's own page: drf-spectacular's templates are found only when
    # it is in INSTALLED_APPS, which the inspector does not require.
    template_name = "anvia_django/api/swagger_ui.html"

    @staticmethod
    def _swagger_ui_resource(filename: str) -> str:
        if sidecar_installed():
            return static(f"{_SIDECAR}/swagger-ui-dist/{filename}")
        return f"{spectacular_settings.SWAGGER_UI_DIST}/{filename}"

    @staticmethod
    def _swagger_ui_favicon() -> str:
        if sidecar_installed():
            return static(f"{_SIDECAR}/swagger-ui-dist/favicon-32x32.png")
        return str(spectacular_settings.SWAGGER_UI_FAVICON_HREF)


class InspectorRedocView(InspectorAccessMixin, ReadableErrorsMixin, SpectacularRedocView):
    url_name = SCHEMA_URL_NAME
    title = TITLE
    # As for Swagger UI; drf-spectacular's page also loads web fonts from Google.
    template_name = "anvia_django/api/redoc.html"

    @staticmethod
    def _redoc_standalone() -> str:
        if sidecar_installed():
            return static(f"{_SIDECAR}/redoc/bundles/redoc.standalone.js")
        return f"{spectacular_settings.REDOC_DIST}/bundles/redoc.standalone.js"
