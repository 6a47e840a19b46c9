"""No import cycle among the package's modules, counting every import.

import-linter's contracts say which layer may import which; this says the modules'
graph has no loop at all. Every import is counted: those at the top of a module, those
inside a function (the lazy ones that keep a start fast) and those under
`if TYPE_CHECKING:`, since a loop through any of them is still a knot a reader has to
untie, and a lazy import made eager later would turn it into an import error.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import subagent_host

PACKAGE = Path(subagent_host.__file__).parent

# Cycles that remain, each with why it is not broken yet. Keep it empty if you can:
# an entry names the cycle exactly (its modules in order, starting with the smallest).
ALLOWED: dict[tuple[str, ...], str] = {}


def modules_of(root: Path, name: str) -> dict[str, Path]:
    """Every module under the package directory `root` (named `name`), by dotted name."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = [name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported(module: str, path: Path, modules: Mapping[str, Path]) -> Iterator[str]:
    """The package's modules `module` imports, anywhere in its text."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (target := nearest(alias.name, modules)) is not None:
                    yield target
        elif isinstance(node, ast.ImportFrom):
            base = absolute(module, is_package, node.level, node.module)
            for alias in node.names:
                # `from x import y`: y is a submodule of x, or a name defined in x.
                if f"{base}.{alias.name}" in modules:
                    yield f"{base}.{alias.name}"
                elif (target := nearest(base, modules)) is not None:
                    yield target


def absolute(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The dotted name a (possibly relative) `from` import names."""
    if level == 0:
        return name or ""
    parts = module.split(".")
    anchor = parts if is_package else parts[:-1]
    anchor = anchor[: len(anchor) - (level - 1)]
    return ".".join([*anchor, name] if name else anchor)


def nearest(name: str, modules: Mapping[str, Path]) -> str | None:
    """The module `name` is, or the deepest package of ours it lies in (None: not ours)."""
    parts = name.split(".")
    while parts:
        if (candidate := ".".join(parts)) in modules:
            return candidate
        parts.pop()
    return None


def import_graph(root: Path, name: str) -> dict[str, set[str]]:
    modules = modules_of(root, name)
    return {
        # A package's own `from . import x` of a name it defines is no edge to itself.
        module: {target for target in imported(module, path, modules) if target != module}
        for module, path in modules.items()
    }


def cycles(graph: Mapping[str, set[str]]) -> list[tuple[str, ...]]:
    """One cycle through each strongly connected group of modules, smallest module first."""
    found = []
    for group in strongly_connected(graph):
        if len(group) > 1:
            found.append(cycle_within(graph, group))
    return sorted(found)


def strongly_connected(graph: Mapping[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative (the graph is a few hundred modules deep at most)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            advanced = False
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    advanced = True
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                groups.append(group)
    return groups


def cycle_within(graph: Mapping[str, set[str]], group: set[str]) -> tuple[str, ...]:
    """The shortest cycle through the group's smallest module, by breadth-first search."""
    start = min(group)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node] & group):
                if target == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return tuple(reversed(path))
                if target not in came_from:
                    came_from[target] = node
                    following.append(target)
        frontier = following
    raise AssertionError(f"no cycle through {start} in its own group")


def described(cycle: tuple[str, ...]) -> str:
    return " -> ".join((*cycle, cycle[0]))


def test_the_package_has_no_import_cycle() -> None:
    found = cycles(import_graph(PACKAGE, "subagent_host"))
    unexplained = [described(cycle) for cycle in found if cycle not in ALLOWED]
    assert unexplained == [], "import cycles:\n" + "\n".join(unexplained)
    # An allowed cycle that is gone is taken off the list, so the list stays true.
    assert [cycle for cycle in ALLOWED if cycle not in found] == []


def test_every_kind_of_import_is_counted(tmp_path: Path) -> None:
    """The graph sees a function-local import, one under TYPE_CHECKING, a relative one and
    `from package import submodule`: each closes a cycle here, and each is found."""
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "def later():\n    from pkg.b import thing\n",
        "b.py": "import typing\nif typing.TYPE_CHECKING:\n    import pkg.a\nthing = 1\n",
        "sub/__init__.py": "",
        "sub/c.py": "from . import d\n",
        "sub/d.py": "from pkg.sub import c\n",
        "e.py": "from .sub.c import something\n",
        "f.py": "import pkg.e\n",
    }
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    graph = import_graph(root, "pkg")
    assert graph["pkg.e"] == {"pkg.sub.c"}
    assert graph["pkg.f"] == {"pkg.e"}
    assert cycles(graph) == [("pkg.a", "pkg.b"), ("pkg.sub.c", "pkg.sub.d")]
    assert described(("pkg.a", "pkg.b")) == "pkg.a -> pkg.b -> pkg.a"
