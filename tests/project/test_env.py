"""Every `TRACESCORE_*` environment variable is defined once (tracescore._env), read through that
definition, and listed in the API reference's table; a name added on one side only fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tracescore import _env

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"TRACESCORE_[A-Z0-9_]*[A-Z0-9]")
# names the docs mention that tracescore does not read: placeholders of the shipped Collector
# configs (collector_config/) and a switch of this project's own test suite
NOT_READ = {"TRACESCORE_GATEWAY_ENDPOINT", "TRACESCORE_GATEWAY_1", "TRACESCORE_GATEWAY_2",
            "TRACESCORE_GATEWAY_3", "TRACESCORE_CONVERSATIONS_1", "TRACESCORE_CONVERSATIONS_2",
            "TRACESCORE_UPDATE_SCREENSHOT"}
DEFINED = {var.name for var in _env.ALL}


def _reference_table() -> dict[str, str]:
    page = (ROOT / "docs" / "reference.md").read_text("utf-8")
    section = page.split("\n## Environment variables\n")[1].split("\n## ")[0]
    return {m[0]: m[1].strip() for m in re.findall(r"^\| `(TRACESCORE_\w+)` \|([^|]*)\|", section,
                                                   re.MULTILINE)}


def test_the_reference_table_lists_exactly_the_defined_variables() -> None:
    assert len(DEFINED) == len(_env.ALL) >= 12
    assert set(_reference_table()) == DEFINED


@pytest.mark.parametrize("var", _env.ALL, ids=lambda var: var.name)
def test_the_reference_table_gives_each_default(var: _env.EnvVar[object]) -> None:
    documented = _reference_table()[var.name]
    if isinstance(var.default, bool):
        assert documented == f"`{str(var.default).lower()}`"
    elif isinstance(var.default, int):
        assert documented.startswith(str(var.default))


def test_the_package_names_no_variable_it_does_not_define_and_spells_none_out() -> None:
    package = ROOT / "tracescore"
    sources = {path: path.read_text("utf-8") for path in package.rglob("*.py")
               if path.name != "_env.py"}
    named = {name for text in sources.values() for name in NAME.findall(text)}
    assert named - DEFINED == set()
    literal = re.compile(r"""["']TRACESCORE_\w+["']""")  # a name as a whole string: a second definition
    assert {str(p.relative_to(ROOT)) for p, text in sources.items() if literal.search(text)} == set()


def test_the_docs_name_no_variable_that_is_not_defined() -> None:
    pages = [*(ROOT / "docs").glob("*.md"), ROOT / "README.md"]
    named = {name for page in pages for name in NAME.findall(page.read_text("utf-8"))}
    assert named - DEFINED - NOT_READ == set()


def test_a_bad_value_warns_names_the_variable_and_gives_the_default(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_env.MAX_SPAN_BYTES.name, "100")  # under the minimum
    with pytest.warns(RuntimeWarning, match=_env.MAX_SPAN_BYTES.name):
        assert _env.MAX_SPAN_BYTES.get() == _env.MAX_SPAN_BYTES.default
    monkeypatch.setenv(_env.REDACT.name, " Off ")
    assert _env.REDACT.get() is False
    monkeypatch.setenv(_env.JUDGE_MODEL.name, "  ")
    assert _env.JUDGE_MODEL.get() is None
