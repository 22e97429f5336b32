"""Where each rule lives (CONTRIBUTING.md, "Rules and their homes"), read
from the source: every import, function-level ones included."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "anvia_django"


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name, migrations aside (history)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        if "migrations" in path.parts:
            continue
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that runs, at any depth; not those under
    ``if TYPE_CHECKING:``, which never do."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _type_checking(node):
            yield from (n for child in node.orelse for n in _imports(ast.Module([child], [])))
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _imports(node)


@cache
def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports."""
    known = modules()
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in _imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names if alias.name in known)
                continue
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                target = f"{base}.{alias.name}"
                edges.add(target if target in known else base)
        graph[name] = {edge for edge in edges if edge in known and edge != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


LAYERS = (
    "anvia_django.models",
    "anvia_django.fields",
    "anvia_django.encryption",
    "anvia_django.persistence",
)


def test_no_import_cycle_links_models_fields_encryption_and_persistence() -> None:
    graph = import_graph()
    layered = {
        name: {edge for edge in edges if edge.startswith(LAYERS)}
        for name, edges in graph.items()
        if name.startswith(LAYERS)
    }
    assert cycles(layered) == []


def test_the_graph_sees_function_level_imports() -> None:
    # The test above would pass vacuously if it missed them.
    assert (
        "anvia_django.persistence.codec.sealed" in import_graph()["anvia_django.persistence.codec"]
    )


def test_no_module_imports_another_modules_underscore_name() -> None:
    known = modules()
    offenders = []
    for name, path in known.items():
        for node in _imports(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                offenders += [
                    f"{name}: {alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and not alias.name.endswith("__")
                ]
    assert offenders == []


def _sources_matching(pattern: str) -> set[str]:
    regex = re.compile(pattern)
    return {
        name
        for name, path in modules().items()
        if any(regex.search(line) for line in path.read_text().splitlines())
    }


def test_vendors_are_told_apart_only_by_the_dialects_and_the_checks() -> None:
    outside = {
        name
        for name in _sources_matching(r"\.vendor\b")
        if not name.startswith("anvia_django.persistence.dialects")
    }
    assert outside == {"anvia_django.checks"}


def test_cryptography_is_imported_by_one_module() -> None:
    assert _sources_matching(r"^\s*(from|import) cryptography\b") == {
        "anvia_django.encryption.envelope"
    }


def test_whether_encryption_is_on_is_asked_in_three_modules_at_most() -> None:
    asked = _sources_matching(r"encryption_enabled\(")
    assert asked == {
        "anvia_django.encryption",  # where it is defined
        "anvia_django.persistence.codec",  # codec_for
        "anvia_django.checks",
    }
