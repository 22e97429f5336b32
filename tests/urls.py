from django.contrib import admin
from django.urls import include, path
from django.urls.resolvers import URLPattern, URLResolver

# anvia_django.urls brings the API root, and with drf-spectacular the schema,
# Swagger UI and ReDoc.
urlpatterns: list[URLPattern | URLResolver] = [
    path("admin/", admin.site.urls),
    path("anvia/", include("anvia_django.urls")),
]
