"""A deterministic, offline :class:`~anvia_django.core.ChatModel` for the demo.

It plays a support agent by rules instead of a language model: an order
number in the question makes it call ``lookup_order``, a shipped order makes
it call ``track_shipment``, and it answers from the tool results. Asked what
was said before, it reads the session history, which is what memory is for.
The same conversation always produces the same messages, so the demo, its
tests and its screenshots are reproducible without a network or a key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from anvia_django.core import ModelReply, ToolSpec
from anvia_django.core.memory import Message, TokenUsage

_ORDER_NUMBER = re.compile(r"#?\b(\d{4})\b")
_RECALL = re.compile(r"\b(earlier|before|remember|previous|last time|history)\b", re.I)

HELP = (
    "I can look up orders and track parcels. Try 'Where is order 1042?', "
    "or ask me what we talked about earlier."
)


def estimate_tokens(value: object) -> int:
    """About four characters of JSON per token, as tokenizers average on English."""
    return max(1, len(json.dumps(value, ensure_ascii=False)) // 4)


class OfflineSupportModel:
    """Answers like a tool-using support agent, without any network."""

    model_name = "offline-support-demo"

    async def complete_with_usage(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> ModelReply:
        """The answer, with token counts estimated the way a provider reports them."""
        reply = await self.complete(messages, tools)
        prompt = estimate_tokens(list(messages)) + sum(
            estimate_tokens([t.name, t.description, t.parameters]) for t in tools
        )
        return ModelReply(reply, TokenUsage(prompt, estimate_tokens(reply)), self.model_name)

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Message:
        offered = {tool.name for tool in tools}
        last = messages[-1] if messages else {"role": "user", "content": ""}
        if last.get("role") == "tool":
            return self._after_tool(messages, last, offered)
        text = str(last.get("content") or "")
        match = _ORDER_NUMBER.search(text)
        if match and "lookup_order" in offered:
            return self._call(messages, "lookup_order", {"order_id": match.group(1)})
        if _RECALL.search(text):
            return {"role": "assistant", "content": self._recall(messages[:-1])}
        if re.search(r"\b(hi|hello|hey)\b", text, re.I):
            return {"role": "assistant", "content": f"Hello! {HELP}"}
        return {"role": "assistant", "content": HELP}

    def _after_tool(
        self, messages: Sequence[Message], result: Message, offered: set[str]
    ) -> Message:
        content = str(result.get("content") or "")
        if content.startswith("Error:"):
            reason = content.split(":", 2)[-1].strip()
            return {
                "role": "assistant",
                "content": f"Sorry, I couldn't find that: {reason}. Please check the number.",
            }
        data: dict[str, Any] = json.loads(content)
        if result.get("name") == "lookup_order":
            if data.get("status") == "shipped" and "track_shipment" in offered:
                return self._call(
                    messages, "track_shipment", {"tracking_number": data["tracking_number"]}
                )
            return {"role": "assistant", "content": _order_answer(data)}
        if data.get("eta") == "delivered":
            answer = f"Parcel {data['tracking_number']}: {data['location']}."
        else:
            answer = (
                f"Your parcel {data['tracking_number']} is at the {data['location']} "
                f"and should arrive on {data['eta']}."
            )
        return {"role": "assistant", "content": answer}

    def _call(self, messages: Sequence[Message], name: str, arguments: dict[str, Any]) -> Message:
        # Ids derived from the history length: unique within the session and
        # the same on every replay.
        call_id = f"call_{len(messages)}"
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call_id, "name": name, "arguments": arguments}],
        }

    def _recall(self, history: Sequence[Message]) -> str:
        questions = [
            str(m.get("content"))
            for m in history
            if m.get("role") == "user" and isinstance(m.get("content"), str)
        ]
        if not questions:
            return "This is the start of our conversation; there is nothing earlier."
        listed = "; ".join(f"'{q}'" for q in questions[-3:])
        return f"You asked me {len(questions)} question(s) before. The latest: {listed}."


def _order_answer(order: dict[str, Any]) -> str:
    item, number, status = order["item"], order["order_id"], order["status"]
    if status == "processing":
        return f"Order {number} ({item}) is being packed and has not shipped yet."
    if status == "delivered":
        return f"Order {number} ({item}) was delivered by {order['carrier']}."
    return f"Order {number} ({item}) is {status}."
