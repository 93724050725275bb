"""OpenInference `input.value` / `output.value` on agent spans (Phoenix's input and output columns):
opt-in from code, configure() and the environment; same capture, redaction and truncation rules
as the GenAI attributes; exported over real OTLP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from _helpers import shut_down_pipelines
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_decorators_support import only_span

import tracescore
from tracescore import _config
from tracescore import _semconv as sc
from tracescore._config import set_content_capture
from tracescore._content import serialize
from tracescore._exceptions import ConfigurationError
from tracescore._secret_rules import secret_name_label
from tracescore.testing import OTLPReceiver

OI_KEYS = (sc.OI_INPUT_VALUE, sc.OI_INPUT_MIME_TYPE, sc.OI_OUTPUT_VALUE, sc.OI_OUTPUT_MIME_TYPE)
_VARS = (_config.ENV_OTEL_CAPTURE, _config.ENV_CAPTURE, _config.ENV_MAX_LENGTH,
         _config.ENV_REDACT, _config.ENV_OPENINFERENCE)


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch, span_exporter) -> Iterator[None]:
    for var in _VARS:
        monkeypatch.delenv(var, raising=False)
    _config.reset_content_settings()
    yield
    shut_down_pipelines()
    monkeypatch.undo()
    _config.reset_content_settings()


def _echo(value: Any) -> Any:
    return value


def _json_values() -> st.SearchStrategy[Any]:
    # (numbers that look like card numbers and values under keys that name a secret are
    # redacted: families of their own in test_content and test_redaction)
    scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=30)
    keys = st.text(max_size=8).filter(lambda key: secret_name_label(key) is None)
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                        | st.dictionaries(keys, inner, max_size=4), max_leaves=12)


def _expected_mime(value: Any) -> str:
    return sc.OI_MIME_JSON if isinstance(value, (dict, list)) else sc.OI_MIME_TEXT


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_json_values(), flavour=st.sampled_from(["sync", "async", "generator"]))
def test_agent_spans_carry_input_and_output_values_when_turned_on(span_exporter, value: Any,
                                                                  flavour: str) -> None:
    span_exporter.clear()
    set_content_capture(True, openinference=True)
    if flavour == "sync":
        result = tracescore.agent(name="echo")(_echo)(value)
    elif flavour == "async":
        async def aecho(v: Any) -> Any:
            return v

        result = asyncio.run(tracescore.agent(name="echo")(aecho)(value))
    else:
        def gen(v: Any) -> Iterator[Any]:
            yield v

        (result,) = list(tracescore.agent(name="echo")(gen)(value))
    assert result == value
    attrs = only_span(span_exporter).attributes or {}
    assert attrs[sc.OI_SPAN_KIND] == sc.OI_SPAN_KIND_AGENT
    assert attrs[sc.OI_INPUT_VALUE] == serialize(value)
    assert attrs[sc.OI_INPUT_MIME_TYPE] == _expected_mime(value)
    if flavour != "generator":  # a generator's output is its joined items, checked below
        assert attrs[sc.OI_OUTPUT_VALUE] == serialize(value)
        assert attrs[sc.OI_OUTPUT_MIME_TYPE] == _expected_mime(value)
    if attrs[sc.OI_INPUT_MIME_TYPE] == sc.OI_MIME_JSON:
        assert json.loads(str(attrs[sc.OI_INPUT_VALUE])) == value


def test_generator_output_value_is_the_joined_text(span_exporter) -> None:
    set_content_capture(True, openinference=True)

    @tracescore.agent(name="streamer")
    def streamer(question: str) -> Iterator[str]:
        yield "Paris "
        yield "is the capital."

    assert "".join(streamer("Capital of France?")) == "Paris is the capital."
    attrs = only_span(span_exporter).attributes or {}
    assert attrs[sc.OI_OUTPUT_VALUE] == "Paris is the capital."
    assert attrs[sc.OI_OUTPUT_MIME_TYPE] == sc.OI_MIME_TEXT


def test_off_by_default_and_for_other_span_kinds(span_exporter) -> None:
    assert _config.content_settings().openinference is False
    tracescore.agent(name="echo")(_echo)("hello")
    attrs = only_span(span_exporter).attributes or {}
    assert not set(attrs) & {*OI_KEYS, sc.OI_SPAN_KIND}
    span_exporter.clear()
    set_content_capture(openinference=True)
    tracescore.tool(name="lookup")(_echo)("hello")
    assert not set(only_span(span_exporter).attributes or {}) & {*OI_KEYS, sc.OI_SPAN_KIND}


@pytest.mark.parametrize("how", ["code", "env", "configure"])
def test_each_switch_turns_it_on(span_exporter, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    if how == "code":
        set_content_capture(openinference=True)
    elif how == "env":
        monkeypatch.setenv(_config.ENV_OPENINFERENCE, "true")
        _config.reset_content_settings()
    else:
        tracescore.configure(exporter="none", openinference=True)
    tracescore.agent(name="echo")(_echo)("What is the capital of France?")
    spans = [s for s in span_exporter.get_finished_spans() if s.name == "invoke_agent echo"]
    assert spans[-1].attributes[sc.OI_INPUT_VALUE] == "What is the capital of France?"
    assert spans[-1].attributes[sc.OI_OUTPUT_MIME_TYPE] == sc.OI_MIME_TEXT


def test_capture_off_keeps_the_span_kind_but_no_content(span_exporter) -> None:
    set_content_capture(False, openinference=True)
    tracescore.agent(name="echo")(_echo)("secret question")
    attrs = only_span(span_exporter).attributes or {}
    assert attrs[sc.OI_SPAN_KIND] == sc.OI_SPAN_KIND_AGENT
    assert not set(attrs) & set(OI_KEYS)


def test_values_are_redacted_and_truncated_like_the_genai_attributes(span_exporter) -> None:
    set_content_capture(True, openinference=True, redact=True, max_length=64)
    key = "sk-" + "A1b2C3d4" * 6
    tracescore.agent(name="echo")(_echo)(f"my key is {key} " + "x" * 200)
    attrs = only_span(span_exporter).attributes or {}
    value = str(attrs[sc.OI_INPUT_VALUE])
    assert key not in value and key not in str(attrs[sc.OI_OUTPUT_VALUE])
    assert len(value) < 120


def test_failed_call_has_input_but_no_output(span_exporter) -> None:
    set_content_capture(openinference=True)

    @tracescore.agent(name="broken")
    def broken(question: str) -> str:
        raise KeyError(question)

    with pytest.raises(KeyError):
        broken("why?")
    attrs = only_span(span_exporter).attributes or {}
    assert attrs[sc.OI_INPUT_VALUE] == "why?"
    assert sc.OI_OUTPUT_VALUE not in attrs


@pytest.mark.parametrize("bad", ["yes", 1, 0.0])
def test_bad_switch_values_are_refused(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="openinference"):
        set_content_capture(openinference=bad)
    with pytest.raises(ConfigurationError, match="openinference"):
        tracescore.configure(exporter="none", openinference=bad)


def test_bad_env_value_warns_and_stays_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_config.ENV_OPENINFERENCE, "sometimes")
    with pytest.warns(RuntimeWarning, match=_config.ENV_OPENINFERENCE):
        assert _config.reset_content_settings().openinference is False
    monkeypatch.delenv(_config.ENV_OPENINFERENCE)


def test_values_reach_a_real_otlp_receiver(otlp_receiver: OTLPReceiver) -> None:
    handle = tracescore.configure(exporter="otlp-http", endpoint=otlp_receiver.http_endpoint,
                                  openinference=True)
    tracescore.agent(name="geo")(lambda q: {"answer": "Paris"})("Capital of France?")
    assert handle.flush(10)
    (span,) = otlp_receiver.wait_for_spans(1)
    assert span.attributes[sc.OI_SPAN_KIND] == "AGENT"
    assert span.attributes[sc.OI_INPUT_VALUE] == "Capital of France?"
    assert span.attributes[sc.OI_INPUT_MIME_TYPE] == "text/plain"
    assert json.loads(span.attributes[sc.OI_OUTPUT_VALUE]) == {"answer": "Paris"}
    assert span.attributes[sc.OI_OUTPUT_MIME_TYPE] == "application/json"
