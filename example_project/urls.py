"""The chat page at ``/``, the admin, and the inspector API with its schema."""

from django.contrib import admin
from django.urls import include, path

from anvia_django.api.schema import InspectorSchemaView

urlpatterns = [
    path("", include("example_project.demo.urls")),
    path("admin/", admin.site.urls),
    path("anvia/", include("anvia_django.urls")),
    path("anvia/api/schema/", InspectorSchemaView.as_view(), name="anvia-schema"),
]
