"""The package's shape, measured: import cycles, backward stage dependencies, sizes.

``python -m tests.layout [DIR]`` prints the figures for a source tree (default: this
repository's ``das/``); ``tests/unit/test_layout.py`` asserts them. Every import counts,
including those under ``if TYPE_CHECKING:`` and inside functions: a cycle hidden behind a
late import is still a cycle a reader has to hold in their head.
"""

from __future__ import annotations

import argparse
import ast
import statistics
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

DAS = Path(__file__).resolve().parents[1] / "das"

# The stages in data-flow order: a package may import from its own stage and earlier ones.
# ``errors`` is shared by all; ``fixtures`` build inputs (they follow the input contract);
# ``job`` and ``cluster`` drive everything.
STAGES: tuple[tuple[str, ...], ...] = (
    ("errors",),
    ("spec",),
    ("spark",),
    ("input",),
    ("privacy",),
    ("estimate",),
    ("postprocess",),
    ("output",),
    ("design",),
    ("confidential",),
    ("fixtures",),
    ("job", "cluster"),
)
MAX_MODULE_LINES = 500


@dataclass(frozen=True)
class Module:
    name: str  # dotted, e.g. das.postprocess.rounding
    path: Path
    lines: int
    imports: frozenset[str]  # modules of das it imports, dotted
    function_lines: tuple[int, ...]


def modules(root: Path = DAS) -> dict[str, Module]:
    """Every module under ``root`` (a package directory named ``das``) with its imports."""
    found: dict[str, Module] = {}
    paths = sorted(root.rglob("*.py"))
    names = {_dotted(root, p) for p in paths}
    for path in paths:
        name = _dotted(root, path)
        tree = ast.parse(path.read_text(), str(path))
        found[name] = Module(
            name=name,
            path=path,
            lines=len(path.read_text().splitlines()),
            imports=frozenset(_imports(tree, name, path.name == "__init__.py", names)),
            function_lines=tuple(
                (node.end_lineno or node.lineno) - node.lineno + 1
                for node in ast.walk(tree)
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            ),
        )
    return found


def _dotted(root: Path, path: Path) -> str:
    parts = ["das", *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.AST, name: str, is_package: bool, known: set[str]) -> Iterator[str]:
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from _resolve(alias.name, known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            if not base.startswith("das"):
                continue
            for alias in node.names:
                # ``from das.x import y``: y is a module if one is named so, else a name in x
                target = f"{base}.{alias.name}"
                yield from _resolve(target if target in known else base, known)


def _resolve(dotted: str, known: set[str]) -> Iterator[str]:
    while dotted and dotted not in known:
        dotted = dotted.rpartition(".")[0]
    if dotted and dotted != "das":
        yield dotted


def cycles(found: Mapping[str, Module]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    result: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(found[v].imports):
            if w not in found or w == v:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(found):
        if v not in index:
            visit(v)
    return result


def stage_of(name: str) -> int | None:
    """The stage index of a module (None for the package root ``das``)."""
    parts = name.split(".")
    if len(parts) < 2:
        return None
    for i, stage in enumerate(STAGES):
        if parts[1] in stage:
            return i
    return -1  # a top-level module not placed in any stage


def backward(found: Mapping[str, Module]) -> list[tuple[str, str]]:
    """(importer, imported) pairs where an earlier stage imports a later one."""
    pairs = []
    for m in found.values():
        here = stage_of(m.name)
        for target in m.imports:
            there = stage_of(target)
            if here not in (None, -1) and there not in (None, -1) and there > here:
                pairs.append((m.name, target))
    return sorted(pairs)


def unplaced(found: Mapping[str, Module]) -> list[str]:
    return sorted(name for name in found if stage_of(name) == -1)


def report(root: Path) -> str:
    found = modules(root)
    functions = [n for m in found.values() for n in m.function_lines]
    lines = [m.lines for m in found.values() if m.lines > 0]
    largest = sorted(found.values(), key=lambda m: -m.lines)[:5]
    text = [
        f"modules: {len(found)} ({sum(lines)} lines)",
        f"import cycles: {len(cycles(found))}",
        *(f"  cycle: {' <-> '.join(c)}" for c in cycles(found)),
        f"backward stage imports: {len(backward(found))}",
        *(f"  {a} -> {b}" for a, b in backward(found)),
        f"modules outside the stages: {', '.join(unplaced(found)) or 'none'}",
        f"module lines: median {statistics.median(lines):.0f}, max {max(lines)}; "
        f"over {MAX_MODULE_LINES}: {sum(n > MAX_MODULE_LINES for n in lines)}",
        "largest: " + ", ".join(f"{m.name} {m.lines}" for m in largest),
        f"function lines: {len(functions)} functions, median {statistics.median(functions):.0f}, "
        f"max {max(functions)}; over 50: {sum(n > 50 for n in functions)}",
    ]
    return "\n".join(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default=str(DAS), help="the das/ directory to measure")
    args = parser.parse_args(argv)
    print(report(Path(args.root).resolve()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
