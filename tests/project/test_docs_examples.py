"""Every Python code block in docs/ and README.md runs, and what it prints matches the `#>` lines
shown under its print calls (pytest-examples).

The blocks run against real loopback servers: the OTLP endpoints written in the docs are pointed
at a real OTLP receiver, and litellm's OpenAI provider (the LLM and the judge) at a local
OpenAI-compatible stub. A block that cannot run says why in its first line and is tagged
`test="skip"` on its fence: ```` ```python test="skip" ````.
`pytest tests/project/test_docs_examples.py --update-examples` rewrites the `#>` lines from a real run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _helpers import geo_llm_and_judge, shut_down_pipelines
from pytest_examples import CodeExample, EvalExample, find_examples

import tracescore
from tracescore.online._listener import LISTENERS
from tracescore.testing import OTLPReceiver, StubLLMServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(find_examples(ROOT / "docs", ROOT / "README.md"), key=str)
SKIP_REASON = "# Not run by the docs tests:"
# endpoints written in the docs -> attribute of the receiver that stands in for them
ENDPOINTS = {
    "http://localhost:4318": "http_endpoint",
    "http://127.0.0.1:6006": "http_endpoint",  # Phoenix's OTLP/HTTP port
    '"localhost:4317"': "grpc_endpoint",
}


def _example_id(example: CodeExample) -> str:
    return f"{example.path.relative_to(ROOT)}:{example.start_line}"


@dataclasses.dataclass
class _World:
    receiver: OTLPReceiver
    stub: StubLLMServer


@pytest.fixture
def docs_world(
    otlp_receiver: OTLPReceiver, stub_llm: StubLLMServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[_World]:
    """Loopback stand-ins for what the docs talk to; the examples' global state undone after."""
    stub_llm.responder = geo_llm_and_judge
    for name in ("OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.setenv(name, stub_llm.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_receiver.http_endpoint)
    live_before = LISTENERS.live()
    yield _World(otlp_receiver, stub_llm)
    shut_down_pipelines()
    # a block that builds its own provider and ScoringSpanProcessor leaves it registered (the
    # provider's atexit hook keeps it alive); registered, it makes the agent-call filter of
    # every later test want calls at its rate
    for processor in LISTENERS.live():
        if not any(processor is before for before in live_before):
            processor.shutdown()
    tracescore.uninstrument_litellm()


def _pointed_at(example: CodeExample, receiver: OTLPReceiver) -> CodeExample:
    source = example.source
    for written, attribute in ENDPOINTS.items():
        real = getattr(receiver, attribute)
        source = source.replace(written, f'"{real}"' if written.startswith('"') else real)
    return dataclasses.replace(example, source=source)


def test_the_docs_have_examples() -> None:
    pages = {example.path.name for example in EXAMPLES}
    assert {"README.md", "scorers.md", "online.md", "instrumenting.md"} <= pages


def _says_what_it_needs(example: CodeExample) -> bool:
    """The block or the prose just above it names the API key it needs (or passes one)."""
    lines = example.path.read_text("utf-8").splitlines()[:example.start_line - 1]
    above = []
    for line in reversed(lines[:-1]):  # up to the previous block
        if line.startswith("```"):
            break
        above.append(line)
    text = example.source + "\n".join(above)
    return "OPENAI_API_KEY" in text or "api_key=" in text


@pytest.mark.parametrize("example", EXAMPLES, ids=_example_id)
def test_docs_example(example: CodeExample, eval_example: EvalExample, docs_world: _World,
                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A block runs as a reader runs it: without an API key unless it says it needs one."""
    if example.prefix_settings().get("test") == "skip":
        assert example.source.startswith(SKIP_REASON), (
            f"a skipped block must say why in its first line ({SKIP_REASON} ...)")
        pytest.skip(example.source.splitlines()[0].removeprefix(SKIP_REASON).strip())
    if not _says_what_it_needs(example):
        monkeypatch.delenv("OPENAI_API_KEY")
    eval_example.set_config(line_length=100, quotes="either")
    if eval_example.update_examples:
        eval_example.run_print_update(example)
        return
    module = _run_checked(eval_example, _pointed_at(example, docs_world.receiver))
    shown_test = module.get("test_answers_are_scored")  # a test shown in the docs runs for real
    if shown_test is not None:
        shown_test(docs_world.receiver, docs_world.stub)


def _run_checked(eval_example: EvalExample, example: CodeExample) -> dict[str, Any]:
    """Run the example and check its prints; a failure is reported as text, outside the `except`:
    Python 3.11 cannot format the traceback pytest-examples builds for the example's code, and
    pytest would walk into it through the exception's context (INTERNALERROR)."""
    try:
        return eval_example.run_print_check(example)
    except (Exception, pytest.fail.Exception) as exc:  # noqa: BLE001 - any failure of the example
        failure = f"{_example_id(example)}: {type(exc).__name__}: {exc}"
    pytest.fail(failure, pytrace=False)

