"""The ```python blocks of README.md and docs/*.md, as a reader meets them."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
FENCE = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
FRAGMENT = re.compile(r"^<!-- fragment: (\S.*?) -->$")
"""The marker, alone on the line right before the fence, with the reason."""


@dataclass(frozen=True, slots=True)
class Block:
    path: Path
    line: int
    """The line of the opening fence (1-based), for messages."""
    code: str
    fragment: str | None
    """Why the block is deliberately incomplete (compiled, not run); ``None`` runs."""

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    def assigned_names(self) -> set[str]:
        """The module-level names the block assigns (``X = ...``, ``X += ...``)."""
        names: set[str] = set()
        for node in ast.parse(self.code).body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        return names


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def python_blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = FRAGMENT.match(before.strip())
        found.append(Block(path, line, match.group(1), marker.group(1) if marker else None))
    return found
