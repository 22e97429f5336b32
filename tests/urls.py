from django.contrib import admin
from django.urls import include, path
from django.urls.resolvers import URLPattern, URLResolver

urlpatterns: list[URLPattern | URLResolver] = [
    path("admin/", admin.site.urls),
    path("anvia/", include("anvia_django.urls")),
]

try:
    from anvia_django.api.schema import InspectorSchemaView
except ImportError:  # the openapi extra is optional
    pass
else:
    urlpatterns.append(
        path("anvia/api/schema/", InspectorSchemaView.as_view(), name="anvia-schema")
    )
