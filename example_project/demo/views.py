"""The chat page: one template and a small async JSON endpoint pair.

The browser keeps its session id in ``localStorage`` and the transcript
lives in the database, so a conversation survives a reload and a restart.
Each visitor is a user of their own, with an id kept in their Django session
(a cookie): conversations are scoped to it, so a visitor who learns another's
session id gets a 404, never the other's history.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_GET, require_POST

from anvia_django.core import AgentResponse, AgentSession
from anvia_django.core.memory import ConversationScopeError, InvalidMemoryInputError, Lineage
from anvia_django.models import Conversation
from anvia_django.persistence import conversation_lineage

from .agent import demo_agent, uses_remote_model

logger = logging.getLogger(__name__)

# What the page generates: "web-" and a UUID. Anything else is refused, so a
# visitor cannot type their way into one of the seeded conversations.
SESSION_ID = re.compile(r"web-[0-9a-f-]{36}")
MAX_PROMPT_CHARS = 4000
VISITOR_KEY = "anvia_demo_visitor"
VISITOR_PREFIX = "web-visitor-"
CHANNEL = {"channel": "web"}
NOT_FOUND = "No such conversation in this browser."


@ensure_csrf_cookie
@require_GET
async def chat_page(request: HttpRequest) -> HttpResponse:
    await visitor_id(request)  # the session cookie goes out with the page
    return render(request, "demo/chat.html", {"remote_model": uses_remote_model()})


@require_GET
async def chat_history(request: HttpRequest) -> JsonResponse:
    session = _session(request.GET.get("sessionId"), await visitor_id(request))
    if isinstance(session, JsonResponse):
        return session
    try:
        entries = await session.history_entries()
    except ConversationScopeError:
        return _error(404, NOT_FOUND)
    context = session.context
    lineage = await sync_to_async(_lineage)(context.session_id, context.user_id)
    return JsonResponse(
        {
            "messages": [entry.message for entry in entries],
            # Where each message is stored: what "edit" sends back (a list
            # index would be wrong once anything cut the history's start off).
            "positions": [entry.position for entry in entries],
            "lineage": lineage,
        }
    )


async def visitor_id(request: HttpRequest) -> str:
    """This browser's user id, created on its first request.

    Never the same for two visitors: the conversations of all anonymous
    visitors under one user id would be readable by each of them.
    """
    found = await request.session.aget(VISITOR_KEY)
    if isinstance(found, str):
        return found
    created = f"{VISITOR_PREFIX}{uuid.uuid4().hex}"
    await request.session.aset(VISITOR_KEY, created)
    return created


def _lineage(session_id: str, user_id: str | None) -> dict[str, Any]:
    """Where the visitor's session was forked from, and its forks (their sessions only)."""
    found = Conversation.objects.filter(session_id=session_id).values_list("pk", flat=True).first()
    lineage = Lineage(None, []) if found is None else conversation_lineage(found, user_id=user_id)
    source = lineage.forked_from
    return {
        "forkedFrom": (
            {"sessionId": source.session_id, "position": source.position} if source else None
        ),
        "forks": [{"sessionId": f.session_id, "position": f.position} for f in lineage.forks],
    }


@require_POST
async def chat_send(request: HttpRequest) -> JsonResponse:
    body = _json_object(request)
    if isinstance(body, JsonResponse):
        return body
    session = _session(body.get("sessionId"), await visitor_id(request))
    if isinstance(session, JsonResponse):
        return session
    text = _prompt_text(body.get("message"))
    if isinstance(text, JsonResponse):
        return text
    return await _answer(session, text)


@require_POST
async def chat_edit(request: HttpRequest) -> JsonResponse:
    """Edit a user message: fork the conversation just before it into a new
    session, and send the edited text there. The original stays as it was."""
    body = _json_object(request)
    if isinstance(body, JsonResponse):
        return body
    session = _session(body.get("sessionId"), await visitor_id(request))
    if isinstance(session, JsonResponse):
        return session
    position = body.get("position")
    if isinstance(position, bool) or not isinstance(position, int) or position < 0:
        return _error(400, "position must be a non-negative integer.")
    text = _prompt_text(body.get("message"))
    if isinstance(text, JsonResponse):
        return text
    try:
        edited = [e for e in await session.history_entries() if e.position == position]
        if not edited or edited[0].message.get("role") != "user":
            return _error(400, "position must be the position of one of your messages.")
        fork = await session.fork(
            f"web-{uuid.uuid4()}", up_to=position, metadata={"channel": "web"}
        )
    except ConversationScopeError:
        return _error(404, NOT_FOUND)
    return await _answer(fork, text)


def _json_object(request: HttpRequest) -> dict[str, Any] | JsonResponse:
    try:
        body: Any = json.loads(request.body)
    except ValueError:
        return _error(400, "The request body must be JSON.")
    if not isinstance(body, dict):
        return _error(400, "The request body must be a JSON object.")
    return body


def _prompt_text(text: object) -> str | JsonResponse:
    if not isinstance(text, str) or not text.strip():
        return _error(400, "message must be a non-empty string.")
    if len(text) > MAX_PROMPT_CHARS:
        return _error(400, f"message must be at most {MAX_PROMPT_CHARS} characters.")
    return text.strip()


async def _answer(session: AgentSession, text: str) -> JsonResponse:
    try:
        response: AgentResponse = await session.prompt(text).send()
    except ConversationScopeError:
        return _error(404, NOT_FOUND)
    except InvalidMemoryInputError as error:
        return _error(400, str(error))
    except Exception as error:
        # The runtime has recorded the failed run; the visitor gets the kind
        # of failure, never the conversation's content.
        logger.warning("demo agent run failed: %s", type(error).__name__)
        return _error(502, f"The agent failed ({type(error).__name__}); please try again.")
    return JsonResponse(
        {
            "output": response.output,
            "runId": response.run_id,
            "messages": response.messages,
            "sessionId": session.context.session_id,
            "usage": {"totalTokens": response.usage.total_tokens},
        }
    )


def _session(session_id: object, visitor: str) -> AgentSession | JsonResponse:
    if not isinstance(session_id, str) or not SESSION_ID.fullmatch(session_id):
        return _error(400, "sessionId must be 'web-' followed by a UUID.")
    return demo_agent().session(session_id, user_id=visitor, metadata=CHANNEL)


def _error(status: int, message: str) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)
