"""The chat page at ``/``, the admin, and the inspector API (its root, schema,
Swagger UI and ReDoc come with ``anvia_django.urls``)."""

from django.contrib import admin
from django.urls import include, path

from anvia_django.api.schema import InspectorSchemaView

urlpatterns = [
    path("", include("example_project.demo.urls")),
    path("admin/", admin.site.urls),
    path("anvia/", include("anvia_django.urls")),
    # The same view anvia_django.urls serves there, under the name the chat page links to.
    path("anvia/api/schema/", InspectorSchemaView.as_view(), name="anvia-schema"),
    # "Log in" on the browsable API pages.
    path("api-auth/", include("rest_framework.urls")),
]
