"""A Pydantic AI conversation with every part the inspector renders: an
image in the prompt, thinking, tool calls with arguments, a retry prompt
(``ModelRetry``), a tool return and the answer, stored by a real run."""

from __future__ import annotations

import os
import struct
import zlib
from typing import Any

from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import BinaryImage, ModelResponse, TextPart, ThinkingPart, ToolCallPart

from anvia_django.integrations.pydantic_ai import DjangoMemory

from .pydantic_ai_support import Script, drive


def png(width: int, height: int, *, noise: bool = False) -> bytes:
    """A valid RGB PNG: a grey gradient, or random noise (which does not compress)."""
    gradient = bytes(shade for x in range(width) for shade in [x * 255 // width] * 3)
    rows = b"".join(b"\x00" + (os.urandom(width * 3) if noise else gradient) for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        checksum = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + checksum

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


LABEL = png(32, 24)
PHOTO = png(600, 600, noise=True)
"""About a megabyte, base64 in the stored message."""


def label_run(session_id: str, *, user_id: str | None = "u1", photo: bytes = PHOTO) -> list[Any]:
    """Run the agent once on ``session_id``; the run's messages."""
    script = Script(
        [
            ModelResponse(
                parts=[
                    ThinkingPart("The photo shows a shipping label; look the order up."),
                    ToolCallPart("lookup", {"order": "A-42"}, tool_call_id="call-1"),
                ],
                model_name="scripted-1",
            ),
            ModelResponse(
                parts=[ToolCallPart("lookup", {"order": "42"}, tool_call_id="call-2")],
                model_name="scripted-1",
            ),
            ModelResponse(parts=[TextPart("Order 42 shipped on Monday.")], model_name="scripted-1"),
        ]
    )
    agent = Agent(script.model())

    @agent.tool_plain
    def lookup(order: str) -> str:
        """Where an order is."""
        if not order.isdigit():
            raise ModelRetry("Give the order number without letters.")
        return f"Order {order}: shipped, tracking 1Z999."

    prompt = [
        "Where is the order on this label?",
        BinaryImage(data=photo, media_type="image/png", identifier="photo"),
        BinaryImage(data=LABEL, media_type="image/png", identifier="label"),
    ]
    memory = DjangoMemory(session_id, user_id=user_id)
    return drive("run", agent, prompt, capabilities=[memory])
