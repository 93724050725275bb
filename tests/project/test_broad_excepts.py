"""One guard for "never break the app" (`tracescore._guard`): a broad `except` (`Exception`,
`BaseException`, or bare) or `contextlib.suppress(Exception)` anywhere in the package either
always raises (what it caught, after cleanup, or an error of ours made from it), or says on its
own line why the guard does not fit, as in `# noqa: BLE001 - <why>`."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

PACKAGE = Path(__file__).resolve().parents[2] / "tracescore"
_BROAD = {"Exception", "BaseException"}
_MARKER = re.compile(r"#|noqa(:\s*[A-Z]+[0-9]+(\s*,\s*[A-Z]+[0-9]+)*)?|[\s\-:,]")


def _names_broad(node: ast.expr | None) -> bool:
    names = node.elts if isinstance(node, ast.Tuple) else [node]
    return any((isinstance(n, ast.Name) and n.id in _BROAD)
               or (isinstance(n, ast.Attribute) and n.attr in _BROAD) for n in names)


def _is_broad(handler: ast.ExceptHandler) -> bool:
    return handler.type is None or _names_broad(handler.type)


def _broad_suppress(node: ast.Call) -> bool:
    """`contextlib.suppress(Exception)`: a broad except by another name."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name == "suppress" and any(_names_broad(arg) for arg in node.args)


def _raises(handler: ast.ExceptHandler) -> bool:
    """Whether the handler always raises (what it caught, after cleanup, or an error of ours
    made from it): then it swallows nothing."""
    return any(isinstance(node, ast.Raise) for node in handler.body)


def says_why(comment: str) -> bool:
    """Whether a comment gives a reason (more than `# noqa: BLE001`)."""
    return _MARKER.sub("", comment) != ""


def unexplained(source: str, name: str = "<string>") -> list[str]:
    """`name:line` of every broad except (or suppress) in `source` that swallows without a
    reason."""
    comments: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ExceptHandler):
            swallows = _is_broad(node) and not _raises(node)
        elif isinstance(node, ast.Call):
            swallows = _broad_suppress(node)
        else:
            continue
        if swallows and not says_why(comments.get(node.lineno, "")):
            found.append(f"{name}:{node.lineno}")
    return found


def test_every_broad_except_in_the_package_reraises_or_says_why() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found += unexplained(path.read_text(), str(path.relative_to(PACKAGE.parent)))
    assert found == [], "use the guard (tracescore._guard), or say why it does not fit"


_CAUGHT = st.sampled_from(["", " Exception", " BaseException", " (ValueError, Exception)",
                           " builtins.Exception", " Exception as exc", " BaseException as exc"])
_SPECIFIC = st.sampled_from([" ValueError", " (KeyError, TypeError)", " OSError as exc"])
_COMMENT = st.sampled_from(["", "  # noqa: BLE001", "  # noqa: BLE001 -", "  #",
                            "  # noqa: BLE001, S110 - ", "  # noqa:BLE001"])
_SWALLOW = st.sampled_from(["pass", "x = 1", "return None", "def later():\n            raise",
                            "if g():\n            raise", "with h():\n            raise"])


def _handler(caught: str, comment: str, body: str) -> str:
    return f"def f():\n    try:\n        g()\n    except{caught}:{comment}\n        {body}\n"


@given(_CAUGHT, _COMMENT, _SWALLOW)
def test_a_broad_except_that_swallows_without_a_reason_is_found(caught: str, comment: str,
                                                                body: str) -> None:
    assert unexplained(_handler(caught, comment, body)) == ["<string>:4"]


@given(_CAUGHT, _SWALLOW, st.sampled_from(["# noqa: BLE001 - ", "# noqa: BLE001, S110 - ",
                                          "# "]),
       st.sampled_from(["e.g. the disk is full", "best effort at exit", "failures are data"]))
def test_a_reason_explains_it(caught: str, body: str, marker: str, why: str) -> None:
    assert unexplained(_handler(caught, f"  {marker}{why}", body)) == []


@given(_CAUGHT, _COMMENT, st.sampled_from(["raise", "cleanup()\n        raise",
                                           "raise ScorerError('step failed') from None"]))
def test_a_broad_except_that_always_raises_needs_no_reason(caught: str, comment: str,
                                                          body: str) -> None:
    assert unexplained(_handler(caught, comment, body)) == []


@given(_SPECIFIC, _COMMENT, _SWALLOW)
def test_a_specific_except_is_not_broad(caught: str, comment: str, body: str) -> None:
    assert unexplained(_handler(caught, comment, body)) == []


@given(_COMMENT, st.sampled_from(["contextlib.suppress", "suppress"]),
       st.sampled_from(["Exception", "BaseException", "(OSError, Exception)"]))
def test_a_broad_suppress_without_a_reason_is_found(comment: str, call: str, caught: str
                                                    ) -> None:
    source = f"def f():\n    with {call}({caught}):{comment}\n        g()\n"
    assert unexplained(source) == ["<string>:2"]
    assert unexplained(source.replace(f":{comment}\n", ":  # best effort\n")) == []
    assert unexplained(source.replace(caught, "KeyError")) == []


def test_the_guard_replaces_a_broad_except() -> None:
    guarded = "def f():\n    with SITE:\n        g()\n"
    assert unexplained(guarded) == []
