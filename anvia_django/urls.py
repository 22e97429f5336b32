"""The inspector HTTP API: ``path("anvia/", include("anvia_django.urls"))``.

Routes (all GET-only; writes answer 405):

- ``api/conversations/``: summaries, newest first (``limit``, ``userId``, ``cursor``)
- ``api/conversations/<ref>/``: the summary plus the first page of messages
- ``api/conversations/<ref>/messages/``: a page of messages (``after``, ``limit``)
"""

from __future__ import annotations

from django.urls import include, path
from rest_framework.routers import SimpleRouter

from .api.views import ConversationViewSet

app_name = "anvia_django"

router = SimpleRouter()
router.register("api/conversations", ConversationViewSet, basename="conversation")

urlpatterns = [path("", include(router.urls))]
