"""`tracescore rescore --dry-run` builds and reaches no sink of any kind, for every scope: no
Phoenix annotation (a recording stand-in of Phoenix's endpoint and of the sink factory), no log
record, no carrier or scored span written, no judge asked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _gateway_helpers import agent_trace, sender
from click.testing import CliRunner
from test_phoenix_sink import ScriptedPhoenix
from test_rescore_scopes import runs, talks  # noqa: F401 (fixtures)

from tracescore._exporters import OTLPJsonFileExporter
from tracescore.cli import main
from tracescore.online import _delivery, _sinks
from tracescore.online._phoenix_sink import ENV_COLLECTOR_ENDPOINT
from tracescore.testing import StubLLMServer

ALL_SINKS = "[span, carrier, log, phoenix]"


@pytest.fixture
def calls(tmp_path: Path) -> Path:
    path = tmp_path / "calls.jsonl"
    with sender(OTLPJsonFileExporter(path)) as tracer:
        for _ in range(3):
            agent_trace(tracer, plain_children=1)
    return path


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[Any]]]:
    """Every sink the dry run could reach, recording: Phoenix (its endpoint and the sink factory)
    and the log sink."""
    seen: dict[str, list[Any]] = {"phoenix sinks built": [], "log records": []}
    phoenix = ScriptedPhoenix().start()
    monkeypatch.setenv(ENV_COLLECTOR_ENDPOINT, phoenix.url)
    real_factory = _sinks.RESULT_SINKS["phoenix"]

    def factory() -> Any:
        seen["phoenix sinks built"].append(True)
        return real_factory()

    def emit(*args: Any, **kwargs: Any) -> bool:
        seen["log records"].append(args)
        return True

    monkeypatch.setitem(_sinks.RESULT_SINKS, "phoenix", factory)
    monkeypatch.setattr(_delivery, "emit_log_records", emit)
    try:
        yield seen
    finally:
        seen["phoenix requests"] = list(phoenix.requests)
        phoenix.stop()
        assert seen == {"phoenix sinks built": [], "log records": [], "phoenix requests": []}


def _scorer(scope: str, base_url: str) -> str:
    judge = f"model: openai/judge-stub, api_base: '{base_url}', api_key: sk-test, check_model: false"
    return {
        "call": f"{{scorer: relevancy, sinks: {ALL_SINKS}, options: {{{judge}}}}}",
        "run": (f"{{scorer: trajectory-accuracy, sinks: {ALL_SINKS}, "
                "options: {expected_trajectory: [search_flights, book_flight]}}"),
        "conversation": (f"{{scorer: multi-turn-judge, sinks: {ALL_SINKS}, "
                         f"options: {{criterion: The user got an answer., {judge}}}}}"),
    }[scope]


@pytest.mark.parametrize("scope", ["call", "run", "conversation"])
def test_a_dry_run_reaches_no_sink_of_any_scope(scope: str, request: pytest.FixtureRequest,
                                                 tmp_path: Path, stub_llm: StubLLMServer,
                                                 recorded: dict[str, list[Any]]) -> None:
    source: Path = request.getfixturevalue({"call": "calls", "run": "runs",
                                            "conversation": "talks"}[scope])
    config = tmp_path / "dry.yaml"
    config.write_text(f"scoring:\n  scorers:\n    - {_scorer(scope, stub_llm.base_url)}\n")
    result = CliRunner().invoke(main, ["rescore", str(source), "-c", str(config), "--dry-run",
                                       "--force"])
    assert result.exit_code == 0, result.output
    assert "nothing was scored, written or sent" in result.output
    assert "would be made" in result.output
    assert stub_llm.requests == []
    assert list(tmp_path.glob("*.jsonl")) == [source]  # no output file beside the input
