"""The house's rules as docs/ARCHITECTURE.md draws them, read from the code: imports run one way,
down the floors; nothing below the UI imports Qt; and no module imports itself back through
others when it loads (imports under `if TYPE_CHECKING:` are for types only and are not counted
for cycles; imports inside functions run late and are not counted for cycles either)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "desktop"
# top floor first; a module may import its own floor or any floor below it
FLOORS = [
    {"__main__", "app", "cli", "cli_signals", "composition", "engine_runner", "pages", "model_control"},
    {"engine_proxy"},
    {"ui"},
    {"recording"},
    {"call"},
    {"speech", "api_control", "engine_hosts", "serve"},
    {"gateway", "settings", "cli_conversation"},
    {"chat", "api"},
    {"tools"},
    {"models"},
    {"workers"},
    {"protocol"},
    {"model", "media"},
    {"errors", "logs", "safefile", "bounded", "tasks", "gc_policy", "qtdeps", ""},
]
FLOOR = {name: i for i, names in enumerate(FLOORS) for name in names}
QT_ALLOWED = {"ui", "app", "composition", "engine_runner", "pages", "gc_policy", "qtdeps", "__main__"}


def room(module: str) -> str:
    """desktop.gateway.pool → gateway; desktop.app → app; desktop → ''."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def module_of(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> list[tuple[str, bool, bool]]:
    """(imported module, at load time, for types only) for every import in the file."""
    tree = ast.parse(path.read_text())
    out: list[tuple[str, bool, bool]] = []

    def visit(node: ast.AST, top: bool, types: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for stmt in child.body:
                    visit_stmt(stmt, top, True)
                for stmt in child.orelse:
                    visit_stmt(stmt, top, types)
                continue
            visit_stmt(child, top, types)

    def visit_stmt(stmt: ast.AST, top: bool, types: bool) -> None:
        if isinstance(stmt, ast.Import):
            out.extend((a.name, top, types) for a in stmt.names)
        elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
            out.append((stmt.module, top, types))
            out.extend((f"{stmt.module}.{a.name}", top, types) for a in stmt.names)  # `from desktop.x import y` (a module y)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            visit(stmt, False, types)
        else:
            visit(stmt, top, types)

    visit(tree, True, False)
    return out


def sources() -> dict[str, Path]:
    return {module_of(p): p for p in ROOT.rglob("*.py")}


def test_every_room_has_a_floor():
    rooms = {room(m) for m in sources()}
    assert rooms <= set(FLOOR), f"rooms with no floor in FLOORS: {sorted(rooms - set(FLOOR))}"


def test_imports_never_run_up_a_floor():
    mods = sources()
    upward = []
    for mod, path in mods.items():
        for target, _top, _types in imports(path):
            if target.startswith("desktop.") and target in mods and FLOOR[room(target)] < FLOOR[room(mod)]:
                upward.append(f"{mod} -> {target}")
    assert not upward, "imports that run up the house:\n" + "\n".join(sorted(set(upward)))


def test_nothing_below_the_ui_imports_qt():
    found = [f"{mod}: {target}" for mod, path in sources().items() if room(mod) not in QT_ALLOWED
             for target, _top, _types in imports(path) if target.split(".")[0] in ("PySide6", "qasync")]
    assert not found, "Qt below the UI:\n" + "\n".join(found)


def test_no_module_imports_itself_back_when_it_loads():
    mods = sources()
    graph = {m: {t for t, top, types in imports(p) if top and not types and t in mods and t != m} for m, p in mods.items()}
    for m in list(graph):  # importing desktop.a.b loads desktop.a first
        graph[m] |= {".".join(t.split(".")[:i]) for t in graph[m] for i in range(2, t.count(".") + 1)} & mods.keys() - {m}
    cycles, state = [], {}

    def walk(m: str, stack: list[str]) -> None:
        state[m] = 1
        for t in sorted(graph[m]):
            if state.get(t) == 1 and not m.startswith(t + "."):  # a package's own __init__ is no cycle
                cycles.append(" -> ".join(stack[stack.index(t):] + [t]))
            elif t not in state:
                walk(t, stack + [t])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            walk(m, [m])
    assert not cycles, "modules that import themselves back when they load:\n" + "\n".join(cycles)
