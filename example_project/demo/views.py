"""The chat page: one template and a small async JSON endpoint pair.

The browser keeps its session id in ``localStorage`` and the transcript
lives in the database, so a conversation survives a reload and a restart.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_GET, require_POST

from anvia_django.core import AgentSession
from anvia_django.core.memory import ConversationScopeError, InvalidMemoryInputError

from .agent import demo_agent, uses_remote_model

logger = logging.getLogger(__name__)

# What the page generates: "web-" and a UUID. Anything else is refused, so a
# visitor cannot type their way into one of the seeded conversations.
SESSION_ID = re.compile(r"web-[0-9a-f-]{36}")
MAX_PROMPT_CHARS = 4000
WEB_USER = "web-visitor"


@ensure_csrf_cookie
@require_GET
async def chat_page(request: HttpRequest) -> HttpResponse:
    return render(request, "demo/chat.html", {"remote_model": uses_remote_model()})


@require_GET
async def chat_history(request: HttpRequest) -> JsonResponse:
    session = _session(request.GET.get("sessionId"))
    if isinstance(session, JsonResponse):
        return session
    try:
        messages = await session.history()
    except ConversationScopeError:
        return _error(403, "This session belongs to someone else.")
    return JsonResponse({"messages": messages})


@require_POST
async def chat_send(request: HttpRequest) -> JsonResponse:
    try:
        body: Any = json.loads(request.body)
    except ValueError:
        return _error(400, "The request body must be JSON.")
    if not isinstance(body, dict):
        return _error(400, "The request body must be a JSON object.")
    session = _session(body.get("sessionId"))
    if isinstance(session, JsonResponse):
        return session
    text = body.get("message")
    if not isinstance(text, str) or not text.strip():
        return _error(400, "message must be a non-empty string.")
    if len(text) > MAX_PROMPT_CHARS:
        return _error(400, f"message must be at most {MAX_PROMPT_CHARS} characters.")
    try:
        response = await session.prompt(text.strip()).send()
    except ConversationScopeError:
        return _error(403, "This session belongs to someone else.")
    except InvalidMemoryInputError as error:
        return _error(400, str(error))
    except Exception as error:
        # The runtime has recorded the failed run; the visitor gets the kind
        # of failure, never the conversation's content.
        logger.warning("demo agent run failed: %s", type(error).__name__)
        return _error(502, f"The agent failed ({type(error).__name__}); please try again.")
    return JsonResponse(
        {"output": response.output, "runId": response.run_id, "messages": response.messages}
    )


def _session(session_id: object) -> AgentSession | JsonResponse:
    if not isinstance(session_id, str) or not SESSION_ID.fullmatch(session_id):
        return _error(400, "sessionId must be 'web-' followed by a UUID.")
    return demo_agent().session(session_id, user_id=WEB_USER, metadata={"channel": "web"})


def _error(status: int, message: str) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)
