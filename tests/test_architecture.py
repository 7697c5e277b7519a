"""The package's shape (docs/architecture.md): its rooms (the wings core/, stages/, profile/, lab/, abilities/,
stats/ and the top-level modules) import only what their `__init__` docstring allows, in no cycle between rooms
or modules; no module reaching into another's private names; statistics free of I/O; no file over 560 lines in
benchprof/, scripts/ or perf/, no function over 80 lines in a stage; no banner comments. Read from the source
with `ast`, imports inside functions included."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "benchprof"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[str, list[str]]]:
    """(imported benchprof module, names taken from it) for every import in the file, at any depth."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("benchprof"):
                continue
            names = [alias.name for alias in node.names]
            if node.module is None:  # `from . import x`: x may be a module
                for name in names:
                    found.append((f"{target}.{name}", []))
            else:
                found.append((target, names))
        elif isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names if alias.name.startswith("benchprof")]
    return found


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for target, _ in imports(path):
            while target not in modules and "." in target:  # `from .abilities import x` -> the package
                target = target.rsplit(".", 1)[0]
            if target in modules and target != name:
                edges[name].add(target)
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str]:
    """One import cycle as a path of module names, or [] (depth-first search)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return []


def test_cycle_finder_finds_a_planted_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    edges = graph()
    assert len(edges) > 20  # the package was found
    assert find_cycle(edges) == []


def test_no_module_imports_private_names_of_another():
    offences = []
    for path in PACKAGE.rglob("*.py"):
        for target, names in imports(path):
            offences += [
                f"{module_name(path)} imports {target}.{n}"
                for n in names
                if n.startswith("_") and not n.startswith("__")
            ]
    assert offences == []


def test_statistics_modules_are_pure():
    """stats/: arrays in, numbers out; no file, plot or package I/O imports; of benchprof only layout and each other."""
    paths = sorted((PACKAGE / "stats").glob("*.py"))
    assert len(paths) > 5  # the package was found
    for path in paths:
        tree = ast.parse(path.read_text())
        imported = {
            alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
        }
        imported |= {
            (node.module or "").split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and not node.level
        }
        assert not imported & {"matplotlib", "json", "csv", "pathlib", "os", "io", "safetensors", "torch"}, path.name
        targets = {target for target, _ in imports(path)}
        assert not {t for t in targets if not t.startswith("benchprof.stats.")} - {"benchprof.core.layout"}, path.name
        calls = {
            node.func.id for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        }
        assert "open" not in calls and "print" not in calls, path.name


MAX_LINES = 560  # a file past this holds more than one idea: split it where the ideas part


def test_no_file_is_longer_than_the_limit():
    paths = [p for folder in ("benchprof", "scripts", "perf") for p in (ROOT / folder).rglob("*.py")]
    assert len(paths) > 50  # the folders were found
    lengths = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in paths}
    assert {name: n for name, n in lengths.items() if n > MAX_LINES} == {}


MAX_STAGE_FUNCTION = 80  # a stage's function past this does more than one step: name the steps


def test_no_stage_function_is_longer_than_the_limit():
    """Every function of stages/, from its `def` line to its last, docstring included (nested ones too)."""
    long = {}
    for path in (PACKAGE / "stages").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_STAGE_FUNCTION:
                    long[f"{path.name}:{node.name}"] = length
    assert long == {}


# What each room may import (besides itself), as its __init__ docstring states it; "*" is anything.
ALLOWED = {
    "benchprof": set(),
    "stats": set(),
    "abilities": {"benchprof"},
    "core": {"benchprof", "abilities", "stats"},
    "profile": {"benchprof", "core", "stats"},
    "stages": {"benchprof", "core", "abilities", "stats", "profile"},
    "lab": {"benchprof", "core", "abilities", "stats", "profile", "stages"},
    "cli": {"benchprof", "core", "abilities", "stats", "profile", "stages", "lab"},
    "__main__": {"cli"},
}
WINGS = ("core", "stages", "profile", "lab", "abilities", "stats")


def room(module: str) -> str:
    """The room of a module: its wing (benchprof.core.layout -> core), or the top-level module itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def room_graph() -> dict[str, set[str]]:
    rooms: dict[str, set[str]] = {}
    for module, targets in graph().items():
        rooms.setdefault(room(module), set()).update(room(t) for t in targets if room(t) != room(module))
    return rooms


def longest_chain(edges: dict[str, set[str]]) -> list[str]:
    """The longest import chain of an acyclic graph, as a path of nodes."""
    best: dict[str, list[str]] = {}

    def visit(node: str) -> list[str]:
        if node not in best:
            best[node] = [node] + max((visit(n) for n in edges.get(node, ())), key=len, default=[])
        return best[node]

    return max((visit(n) for n in edges), key=len)


def test_every_room_is_known_and_imports_only_what_it_may():
    rooms = room_graph()
    assert set(rooms) == set(ALLOWED)  # a new top-level module or wing gets its rule here and in its docstring
    offences = {name: sorted(targets - ALLOWED[name]) for name, targets in rooms.items() if targets - ALLOWED[name]}
    assert offences == {}


def test_rooms_form_no_cycle_and_a_short_chain():
    rooms = room_graph()
    assert find_cycle(rooms) == []
    assert longest_chain({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == ["a", "b", "c"]
    assert len(longest_chain(rooms)) <= 8  # 12 modules deep when the package was flat


def test_each_wing_states_its_rule():
    for wing in WINGS:
        doc = ast.get_docstring(ast.parse((PACKAGE / wing / "__init__.py").read_text())) or ""
        assert "May import" in doc, wing


def test_nothing_but_the_cli_and_scripts_imports_the_lab():
    importers = {room(m) for m, targets in graph().items() for t in targets if room(t) == "lab"}
    assert importers <= {"lab", "cli"}


def test_no_banner_comments():
    """No `# ---- section ----` lines dividing a module into blocks: the project's style rule "Comments say why,
    briefly. No banner blocks, no restating the code." """
    banner = re.compile(r"^\s*#\s*([-=#*~_])\1{3,}")
    offences = [
        f"{module_name(path)}:{number}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if banner.match(line)
    ]
    assert offences == []
