"""The chat page at ``/``, the admin, and the inspector API with its schema."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("", include("example_project.demo.urls")),
    path("admin/", admin.site.urls),
]
