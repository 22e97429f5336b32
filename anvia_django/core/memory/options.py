from __future__ import annotations

from .types import SAVE_POLICIES, MemoryOptions, ResolvedMemoryOptions


def resolve_memory_options(options: MemoryOptions | None = None) -> ResolvedMemoryOptions:
    """Fill the defaults of :class:`MemoryOptions` (save policy ``"message"``)."""
    policy = options.save_policy if options is not None else None
    if policy is None:
        return ResolvedMemoryOptions(save_policy="message")
    if policy not in SAVE_POLICIES:
        raise ValueError(
            f"Unknown save_policy {policy!r}; expected one of {', '.join(SAVE_POLICIES)}."
        )
    return ResolvedMemoryOptions(save_policy=policy)
