"""Errors raised by the agent runtime."""

from __future__ import annotations


class TurnLimitExceededError(RuntimeError):
    """The model kept asking for tools after the agent's last allowed turn."""

    def __init__(self, max_turns: int) -> None:
        self.max_turns = max_turns
        super().__init__(f"The run reached its limit of {max_turns} turns without a final answer.")


class InvalidModelOutputError(ValueError):
    """The chat model returned something that is not an assistant message."""
