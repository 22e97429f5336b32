"""The inspector HTTP API: ``path("anvia/", include("anvia_django.urls"))``.

Routes (all GET-only; writes answer 405):

- ``api/``: the API root, a link to each endpoint
- ``api/conversations/``: summaries, newest first (``limit``, ``userId``, ``cursor``)
- ``api/conversations/<ref>/``: the summary plus the first page of messages
- ``api/conversations/<ref>/messages/``: a page of messages (``after``, ``limit``)
- ``api/conversations/<ref>/messages/<position>/media/<part>/``: a Pydantic AI
  message's binary content (``item``)
- ``api/conversations/<ref>/runs/``, ``lineage/``, ``summaries/`` (``limit``, ``cursor``)
- with LangGraph installed: ``api/langgraph/threads/`` (``limit``, ``cursor``,
  ``threadId``), ``api/langgraph/threads/<thread id>/`` (its checkpoints:
  ``limit``, ``cursor``) and ``.../checkpoints/<checkpoint id>/`` (one decoded:
  ``checkpointNs``)
- with drf-spectacular installed: ``api/schema/`` (OpenAPI), ``api/docs/``
  (Swagger UI) and ``api/redoc/`` (ReDoc)
"""

from __future__ import annotations

from django.urls import include, path
from django.urls.resolvers import URLPattern, URLResolver
from rest_framework.routers import SimpleRouter

from .api.openapi import spectacular_available
from .api.root import InspectorRootView, langgraph_available
from .api.views import ConversationViewSet

app_name = "anvia_django"

router = SimpleRouter()
router.register("api/conversations", ConversationViewSet, basename="conversation")
if langgraph_available():  # the langgraph extra, as for the admin's pages
    from .api.langgraph import LangGraphThreadViewSet

    router.register("api/langgraph/threads", LangGraphThreadViewSet, basename="langgraph-thread")

urlpatterns: list[URLPattern | URLResolver] = [
    path("api/", InspectorRootView.as_view(), name="api-root"),
    path("", include(router.urls)),
]

if spectacular_available():
    from .api.docs import InspectorRedocView, InspectorSwaggerView
    from .api.schema import InspectorSchemaView

    urlpatterns += [
        path("api/schema/", InspectorSchemaView.as_view(), name="schema"),
        path("api/docs/", InspectorSwaggerView.as_view(), name="swagger-ui"),
        path("api/redoc/", InspectorRedocView.as_view(), name="redoc"),
    ]
