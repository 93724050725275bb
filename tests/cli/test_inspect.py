"""`tracescore inspect` shows what would be scored of each agent span, or why not.

On files the real libraries wrote (OpenTelemetry's GenAI util and OpenInference in the
conventions venv, Mastra under node: `rigs/conventions.py`) every agent span would
be scored with the question and answer of its call. An OpenInference AGENT span made by the real
library that keeps its answer under its own key (tests/_unreadable_agent.py) is explained, and
the mapping entry `inspect` prints, saved as the --config file, makes inspect and rescore read it.
`--listen` receives what the OpenTelemetry SDK's OTLP exporters send.
"""

from __future__ import annotations

import itertools
import json
import random
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tracescore import _semconv as sc
from tracescore.cli import main
from tracescore.testing import spans_from_otlp_json

RUNNER = Path(__file__).resolve().parents[1] / "_unreadable_agent.py"
_PLACES = ["Vienna", "Kraków", "São Paulo", "Zürich", "Lyon", "Osaka"]


def generated_cases(seed: int, count: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    cases = []
    for index in range(count):
        place = rng.choice(_PLACES)
        cases.append({"question": f"{index}. Which river flows through {place}?",
                      "answer": f"The river of {place}, {rng.randint(1, 999)} km."})
    return cases


CASES = generated_cases(seed=3, count=3)


def _inspect(*args: str) -> Any:
    result = CliRunner().invoke(main, ["inspect", *args])
    assert result.exit_code == 0, result.output
    return result


def _reports(*args: str) -> list[dict[str, Any]]:
    return list(json.loads(_inspect(*args, "--json").output)["agent_spans"])


# --- real libraries' files ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def library_files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    from rigs.conventions import conventions_venv, export_convention

    folder = tmp_path_factory.mktemp("inspect")
    readable = folder / "readable.jsonl"
    for convention in ("genai", "openinference", "mastra"):
        export_convention(convention, CASES, readable)
    files = {"readable": readable}
    cases = folder / "cases.json"
    cases.write_text(json.dumps(CASES), encoding="utf-8")
    python = str(conventions_venv() / "bin" / "python")
    for kind in ("own_key", "no_content"):
        files[kind] = folder / f"{kind}.jsonl"
        done = subprocess.run([python, str(RUNNER), kind, str(cases), str(files[kind])],
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr[-4000:]
    yield files


@pytest.mark.slow
def test_inspect_shows_the_question_and_answer_of_real_library_agent_spans(
        library_files: dict[str, Path]) -> None:
    reports = _reports(str(library_files["readable"]))
    for convention in ("genai", "openinference", "mastra"):
        found = [r for r in reports if r["framework"] == convention]
        assert [r["scored"] for r in found] == [True] * len(CASES)
        assert [r["question"] for r in found] == [c["question"] for c in CASES]
        assert [r["answer"] for r in found] == [c["answer"] for c in CASES]
        assert {r["agent"] for r in found} == {"geo"}
        if convention != "mastra":  # the GenAI util's and OpenInference's runs call a tool
            assert [[t["name"] for t in r["tool_calls"]] for r in found] == [["lookup"]] * 3
    assert len(reports) == 3 * len(CASES)
    text = _inspect(str(library_files["readable"])).output
    assert text.count("  would be scored: ") == 3 * len(CASES)
    for case in CASES:
        assert f"question:      {case['question']}" in text
    assert re.search(rf"\d+ spans: {3 * len(CASES)} look like agent calls \({3 * len(CASES)} "
                     rf"would be scored, 0 not\), \d+ other spans \(--all lists them\)", text)


@pytest.mark.slow
def test_an_unreadable_real_library_span_gets_its_reason_and_a_mapping_that_reads_it(
        library_files: dict[str, Path], tmp_path: Path) -> None:
    path = str(library_files["own_key"])
    reports = _reports(path)
    assert [(r["scored"], r["framework"], r["reason"]) for r in reports] == [
        (False, "openinference", "no_output_attribute")] * len(CASES)
    assert reports[0]["why"].startswith("no output attribute (output.value); if its "
                                        "framework's content capture is off")
    assert "OPENINFERENCE_HIDE_OUTPUTS" in reports[0]["why"]
    assert "geo.response" in reports[0]["attribute_keys"]
    text = _inspect(path).output
    assert "NOT scored (looks like an agent call: openinference): no output attribute" in text
    # the printed entry, as printed, is the config file
    after = text.split("a recognise.mappings entry that reads it")[1].splitlines()[1:]
    entry = "\n".join(line[4:] for line in itertools.takewhile(
        lambda line: line.startswith("    "), after))
    config = tmp_path / "gateway.yaml"
    config.write_text(entry + "\n", encoding="utf-8")
    again = _reports(path, "--config", str(config))
    assert [r["scored"] for r in again] == [True] * len(CASES)
    assert [r["question"] for r in again] == [c["question"] for c in CASES]
    assert [r["answer"] for r in again] == [c["answer"] for c in CASES]
    assert [[t["name"] for t in r["tool_calls"]] for r in again] == [["lookup"]] * len(CASES)
    # the gateway's engine reads it with the same entry
    out = tmp_path / "rescored.jsonl"
    result = CliRunner().invoke(main, ["rescore", path, "--config", str(config),
                                       "-s", "similarity", "-o", str(out)])
    assert result.exit_code == 0, result.output
    spans = [s for line in out.read_text().splitlines() for s in spans_from_otlp_json(line)]
    assert len(spans) == len(CASES)
    assert all(s.events_named(sc.GEN_AI_EVALUATION_RESULT) for s in spans)


@pytest.mark.slow
def test_an_agent_span_without_content_is_explained_without_a_mapping(
        library_files: dict[str, Path]) -> None:
    reports = _reports(str(library_files["no_content"]))
    assert [(r["framework"], r["reason"]) for r in reports] == [
        ("openinference", "no_input_or_output")] * len(CASES)
    assert reports[0]["mapping"]["input"] is None and reports[0]["mapping"]["output"] is None
    text = _inspect(str(library_files["no_content"])).output
    assert "no attribute looks like its input or output" in text
    assert "recognise:" not in text


# --- the guessed mapping --------------------------------------------------------------------------
_INPUT_KEYS = ["app.user_question", "myapp.prompt_text", "svc.query", "agent.input_text"]
_OUTPUT_KEYS = ["app.final_answer", "svc.response", "myapp.completion", "agent.result"]
_AGENT_SPANS = [  # (name, what makes it an agent span, the convention's own input, output)
    ("geo", {sc.OI_SPAN_KIND: "AGENT"}, sc.OI_INPUT_VALUE, sc.OI_OUTPUT_VALUE),
    ("invoke_agent geo", {sc.GEN_AI_OPERATION_NAME: "invoke_agent"}, sc.GEN_AI_INPUT_MESSAGES,
     sc.GEN_AI_OUTPUT_MESSAGES),
    ("geo.agent", {sc.TL_SPAN_KIND: "agent"}, sc.TL_ENTITY_INPUT, sc.TL_ENTITY_OUTPUT),
    ("invoke_agent geo", {"mastra.span.type": "agent_run"}, "mastra.agent_run.input",
     "mastra.agent_run.output"),
    ("ai.streamText", {"ai.operationId": "ai.streamText"}, "ai.prompt", "ai.response.text"),
]


@pytest.mark.parametrize("seed", range(8))
def test_the_guessed_mapping_reads_content_kept_under_the_apps_own_keys(seed: int) -> None:
    """An agent span whose code keeps the question and/or the answer under its own keys: the
    entry `inspect` prints reads them (and the convention's own key where the span has it)."""
    import tracescore
    from tracescore.online.intake._diagnose import Diagnoser, suggest_mapping
    from tracescore.scoring._inputs import answer_text, question_text

    rng = random.Random(seed)
    chain = tracescore.build_recognisers()
    for name, marks, own_input, own_output in _AGENT_SPANS:
        case = generated_cases(seed, 1)[0]
        attributes: dict[str, Any] = {**marks, "app.version": "1.2", "http.status_code": 200,
                                      "gen_ai.usage.input_tokens": 12}
        moved = rng.choice(("input", "output", "both"))
        if moved == "output":  # the input where the convention has it
            attributes[own_input] = (json.dumps([{"role": "user", "content": case["question"]}])
                                     if own_input == sc.GEN_AI_INPUT_MESSAGES else case["question"])
        else:
            attributes[rng.choice(_INPUT_KEYS)] = case["question"]
        if moved == "input":
            attributes[own_output] = (
                json.dumps([{"role": "assistant", "content": case["answer"]}])
                if own_output == sc.GEN_AI_OUTPUT_MESSAGES else
                json.dumps({"text": case["answer"]}) if own_output.startswith("mastra.")
                else case["answer"])
        else:
            attributes[rng.choice(_OUTPUT_KEYS)] = case["answer"]
        assert tracescore.recognise(name, attributes, chain) is None
        found = Diagnoser(chain)(name, attributes)
        assert found is not None
        entry = suggest_mapping(found, name, attributes)
        call = tracescore.recognise(name, attributes, tracescore.build_recognisers([entry]))
        assert call is not None, (entry, attributes)
        assert call.convention == entry["name"]
        assert (question_text(call.input), answer_text(call.output)) == (
            case["question"], case["answer"])


def test_a_questionless_input_is_not_offered_again() -> None:
    """When the convention's input is there but holds no question, the entry reads another key
    that looks like one, never the same attribute again."""
    from tracescore.online.intake._diagnose import NO_QUESTION, Unreadable, suggest_mapping

    found = Unreadable("genai", NO_QUESTION, sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES,
                       {sc.GEN_AI_OPERATION_NAME: "invoke_agent"})
    attributes = {sc.GEN_AI_OPERATION_NAME: "invoke_agent",
                  sc.GEN_AI_INPUT_MESSAGES: '[{"role": "system", "content": "Be brief."}]',
                  sc.GEN_AI_OUTPUT_MESSAGES: '[{"role": "assistant", "content": "Paris"}]'}
    assert suggest_mapping(found, "invoke_agent geo", attributes)["input"] is None
    attributes["app.user_question"] = "Capital of France?"
    entry = suggest_mapping(found, "invoke_agent geo", attributes)
    assert (entry["input"], entry["output"]) == ("app.user_question", sc.GEN_AI_OUTPUT_MESSAGES)


def test_a_read_span_without_question_text_is_scored_with_a_warning(tmp_path: Path) -> None:
    """A span the chain reads but whose input holds no user text would be scored, and fail in
    the scorers that need the question: inspect says so."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tracescore._otlp_json import to_otlp_json

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.get_tracer("t").start_span("invoke_agent geo", attributes={
        sc.GEN_AI_OPERATION_NAME: "invoke_agent",
        sc.GEN_AI_INPUT_MESSAGES: json.dumps([{"role": "system", "content": "Be brief."}]),
        sc.GEN_AI_OUTPUT_MESSAGES: json.dumps([{"role": "assistant", "content": "Paris"}])}).end()
    path = tmp_path / "traces.jsonl"
    path.write_text(to_otlp_json(encode_spans(exporter.get_finished_spans())) + "\n")
    (report,) = _reports(str(path))
    assert (report["scored"], report["question"], report["answer"]) == (True, "", "Paris")
    assert report["warnings"] == [
        "input has no question text: scorers that read the question (relevancy) will fail"]
    assert "warning:       input has no question text" in _inspect(str(path)).output


# --- receiving ------------------------------------------------------------------------------------
def _agent_spans(provider: Any, cases: list[dict[str, Any]], marker: str) -> None:
    tracer = provider.get_tracer("listen.test")
    for case in cases:
        with tracer.start_as_current_span(f"invoke_agent {marker}", attributes={
                sc.GEN_AI_OPERATION_NAME: "invoke_agent", sc.GEN_AI_AGENT_NAME: marker,
                sc.GEN_AI_INPUT_MESSAGES: json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": case["question"]}]}]),
                sc.GEN_AI_OUTPUT_MESSAGES: json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text",
                                                      "content": case["answer"]}]}])}):
            tracer.start_span("execute_tool lookup", attributes={
                sc.GEN_AI_OPERATION_NAME: "execute_tool", sc.GEN_AI_TOOL_NAME: "lookup"}).end()
    tracer.start_span(f"invoke_agent {marker}", attributes={
        sc.GEN_AI_OPERATION_NAME: "invoke_agent", sc.GEN_AI_AGENT_NAME: marker}).end()


def test_inspect_listen_reports_what_the_sdk_exporters_send() -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    process = subprocess.Popen(
        [sys.executable, "-m", "tracescore", "inspect", "--listen", "--grpc-endpoint",
         "127.0.0.1:0", "--http-endpoint", "127.0.0.1:0", "--for", "120", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        ports: dict[str, int] = {}
        while len(ports) < 2:
            line = process.stderr.readline()
            assert line, "inspect --listen exited before listening"
            found = re.match(r"listening for OTLP/(gRPC|HTTP) on [\d.]+:(\d+)", line)
            if found:
                ports[found.group(1)] = int(found.group(2))
        grpc_cases, http_cases = generated_cases(7, 2), generated_cases(8, 3)
        for exporter, cases, marker in (
                (Grpc(endpoint=f"127.0.0.1:{ports['gRPC']}", insecure=True), grpc_cases, "viagrpc"),
                (Http(endpoint=f"http://127.0.0.1:{ports['HTTP']}/v1/traces"), http_cases,
                 "viahttp")):
            provider = TracerProvider()
            provider.add_span_processor(BatchSpanProcessor(exporter))
            _agent_spans(provider, cases, marker)
            assert provider.force_flush(30_000)
            provider.shutdown()
        process.send_signal(signal.SIGINT)  # Ctrl-C: stop receiving and report
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    payload = json.loads(out)
    for marker, cases in (("viagrpc", grpc_cases), ("viahttp", http_cases)):
        reports = [r for r in payload["agent_spans"] if r["agent"] == marker
                   or r["name"] == f"invoke_agent {marker}"]
        scored = [r for r in reports if r["scored"]]
        assert [r["question"] for r in scored] == [c["question"] for c in cases]
        assert [r["answer"] for r in scored] == [c["answer"] for c in cases]
        assert [[t["name"] for t in r["tool_calls"]] for r in scored] == [["lookup"]] * len(cases)
        assert [(r["framework"], r["reason"]) for r in reports if not r["scored"]] == [
            ("genai", "no_input_or_output")]
    assert payload["other_spans"] == len(grpc_cases) + len(http_cases)  # the tool spans
    assert all(r["where"].startswith("request ") for r in payload["agent_spans"])


# --- bad input ------------------------------------------------------------------------------------
def test_a_bad_line_exits_2_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text('{"resourceSpans": []}\n\nnot json\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["inspect", str(path)])
    assert result.exit_code == 2
    assert f"{path}:3: not JSON" in result.output


@pytest.mark.parametrize("args, message", [
    ([], "give INPUTS or --listen"),
    (["--listen", "x.jsonl"], "give INPUTS or --listen"),
    (["--listen", "--grpc-endpoint", "off", "--http-endpoint", "off"],
     "--listen needs --grpc-endpoint or --http-endpoint"),
    (["--listen", "--http-endpoint", "bad"], "--http-endpoint must be host:port"),
])
def test_inputs_or_listen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str],
                         message: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.jsonl").write_text("\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["inspect", *args])
    assert result.exit_code == 2
    assert message in result.output


def test_a_port_in_use_exits_2_naming_the_option() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = CliRunner().invoke(main, ["inspect", "--listen", "--grpc-endpoint", "off",
                                           "--http-endpoint", f"127.0.0.1:{port}"])
    assert result.exit_code == 2
    assert f"--http-endpoint: 127.0.0.1:{port} is already in use" in result.output


def test_a_file_without_spans_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text('{"resourceSpans": []}\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["inspect", str(path)])
    assert result.exit_code == 2
    assert "no spans found" in result.output
