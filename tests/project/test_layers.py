"""The package's layers (docs/architecture.md): every import of a tracescore module, at module
level or inside a function, goes to the same layer or one below, and no modules import each
other in a circle. Imports under `if TYPE_CHECKING:` are annotations only and are not counted.
A module over about 450 lines says why in its docstring."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "tracescore"

# Lowest first; a module's layer is that of its longest listed prefix.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("tracescore._version", "tracescore._env", "tracescore._exceptions", "tracescore._semconv",
     "tracescore._secret_rules", "tracescore._suppress", "tracescore._http", "tracescore._jsonl",
     "tracescore._otlp_json", "tracescore._targets", "tracescore._signals",
     "tracescore._litellm_support", "tracescore._private_files", "tracescore._words",
     "tracescore._guard"),
    ("tracescore._config", "tracescore._span_cap", "tracescore._endpoints"),
    ("tracescore._exporters", "tracescore._export_pipeline", "tracescore._content"),
    ("tracescore.instrument", "tracescore.scoring"),
    ("tracescore.online.intake",),
    ("tracescore.online", "tracescore._datasets"),
    ("tracescore.gateway", "tracescore.evals", "tracescore.calibration", "tracescore._setup"),
    ("tracescore", "tracescore.cli", "tracescore.__main__", "tracescore.testing"),
)


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imported(name: str, path: Path) -> Iterator[tuple[str, int]]:
    """(module of tracescore imported, line) for every import in `path`, lazy ones included."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    typing_only = {id(inner) for node in ast.walk(tree)
                   if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                   for inner in ast.walk(node)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            submodules = [f"{base}.{alias.name}" for alias in node.names
                          if f"{base}.{alias.name}" in MODULES]
            targets = submodules if len(submodules) == len(node.names) else [base]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target, node.lineno


def _layer(name: str) -> int:
    best, rank = -1, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), index
    assert rank >= 0, f"{name} has no layer in tests/project/test_layers.py (and docs/architecture.md)"
    return rank


def _package_of(name: str) -> str:
    return ".".join(name.split(".")[:2])


def test_every_module_has_a_layer() -> None:
    for name in MODULES:
        _layer(name)


def test_no_import_goes_up_a_layer_or_across_its_siblings() -> None:
    upward = []
    for name, path in MODULES.items():
        for target, line in _imported(name, path):
            here, there = _layer(name), _layer(target)
            across = (here == there and here == 3
                      and _package_of(name) != _package_of(target))  # instrument <-> scoring
            if there > here or across:
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}")
    assert upward == []


def _circle() -> list[str] | None:
    graph = {name: {t for t, _ in _imported(name, path)} for name, path in MODULES.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        stack.append(name)
        for target in sorted(graph[name]):
            if state.get(target) == 1:
                return stack[stack.index(target):] + [target]
            if target not in state and (found := visit(target)):
                return found
        stack.pop()
        state[name] = 2
        return None

    for name in sorted(graph):
        if name not in state and (found := visit(name)):
            return found
    return None


def test_no_modules_import_each_other_in_a_circle() -> None:
    assert _circle() is None


@pytest.mark.parametrize("rogue", ["tracescore.online._core", "tracescore._semconv"])
def test_the_checks_see_an_import_that_breaks_the_rules(rogue: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # a leaf importing the CLI goes up and, with the CLI's imports, closes a circle
    original = _imported

    def with_rogue(name: str, path: Path) -> Iterator[tuple[str, int]]:
        yield from original(name, path)
        if name == rogue:
            yield "tracescore.cli._app", 1

    monkeypatch.setattr(__import__(__name__), "_imported", with_rogue, raising=False)
    globals()["_imported"] = with_rogue
    try:
        with pytest.raises(AssertionError):
            test_no_import_goes_up_a_layer_or_across_its_siblings()
        assert _circle() is not None
    finally:
        globals()["_imported"] = original


def _home(name: str) -> str:
    """The package a module belongs to (the package itself for an `__init__`)."""
    return name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]


def _private_names(name: str, path: Path) -> Iterator[tuple[str, str, int]]:
    """(module, underscored name, line) for every `from tracescore.x import _name` in `path`
    where `_name` is no module: a private name read from another module."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and not node.level and (
                node.module or "").startswith("tracescore"):
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and f"{node.module}.{alias.name}" not in MODULES:
                    yield node.module or "", alias.name, node.lineno


def _crossings(found: dict[str, Path]) -> list[str]:
    crossings = []
    for name, path in found.items():
        for module, private, line in _private_names(name, path):
            target = module
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and _home(target) != _home(name):
                crossings.append(f"{name}:{line} imports {private} "
                                 f"from {module}")
    return crossings


def test_no_module_imports_another_packages_underscored_name(tmp_path: Path) -> None:
    # inside its own package a module may read a sibling's private names; across packages only
    # public names (an internal API such as `tracescore.online.intake`) are imported
    assert _crossings(MODULES) == []
    rogue = tmp_path / "rogue.py"
    rogue.write_text("from tracescore.online._core import _result_events\n")
    assert _crossings({"tracescore.gateway._engine": rogue}) != []  # the check can fail
    rogue.write_text("from tracescore.online._metrics import SHUTDOWN\n")
    assert _crossings({"tracescore.gateway._engine": rogue}) == []


LONG = 450  # lines: "a module stays under about 450 lines; one that is longer says why"


def _unexplained(name: str, source: str) -> str | None:
    lines = source.count("\n")
    reason = re.search(r"\(About \d+ lines: ", ast.get_docstring(ast.parse(source)) or "")
    return f"{name}: {lines} lines" if lines > LONG and reason is None else None


def test_a_long_module_says_why_in_its_docstring() -> None:
    found = [_unexplained(name, path.read_text()) for name, path in MODULES.items()]
    assert [f for f in found if f] == []
    padded = '"""A module."""\n' + "x = 1\n" * LONG
    assert _unexplained("padded", padded) == f"padded: {LONG + 1} lines"  # the check can fail
    explained = '"""A module.\n\n(About 450 lines: one table.)\n"""\n' + "x = 1\n" * LONG
    assert _unexplained("explained", explained) is None
