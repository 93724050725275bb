"""`tracescore rescore` never claims what did not happen: spans an endpoint did not take make it exit 1
with the count and the reason; a bad input line exits 2 naming FILE:LINE (never a traceback); a line
without spans is a warning, inputs without any an error; a scorer that compares with a ground truth
the spans do not carry says so, once, with the count."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from _gateway_helpers import agent_attributes, sender
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tracescore._exporters import OTLPJsonFileExporter
from tracescore.cli import main
from tracescore.testing import OTLPReceiver

QUESTIONS = [("What is the capital of France?", "Paris is the capital of France."),
             ("Who wrote Hamlet?", "Hamlet was written by William Shakespeare."),
             ("How many moons has Mars?", "Mars has two moons, Phobos and Deimos.")] * 2
PROTOCOLS = ("grpc", "http/protobuf")


def _write_traces(path: Path, *, ground_truth: bool = False) -> Path:
    """6 traces (an agent span answering one of QUESTIONS and 2 child spans), one line each."""
    with sender(OTLPJsonFileExporter(path)) as tracer:
        for question, answer in QUESTIONS:
            attributes = agent_attributes(question, answer)
            if ground_truth:
                attributes["tracescore.ground_truth"] = answer
            with tracer.start_as_current_span("invoke_agent geo", attributes=attributes):
                for step in range(2):
                    with tracer.start_as_current_span(f"chat step-{step}"):
                        pass
    return path


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    return _write_traces(tmp_path / "traces.jsonl", ground_truth=True)


@pytest.fixture
def quick(tmp_path: Path) -> Path:
    """A config that gives an endpoint 1 s after the last span was read."""
    path = tmp_path / "quick.yaml"
    path.write_text("shutdown_timeout_s: 1\n")
    return path


def _rescore(*args: str) -> Result:
    result = CliRunner().invoke(main, ["rescore", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    return result


# --- what reached the endpoint ----------------------------------------------------------------
def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_endpoint_that_is_down_exits_1_saying_nothing_was_written(
        protocol: str, traces: Path, quick: Path) -> None:
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    result = _rescore(str(traces), "-s", "similarity", "-c", str(quick), "--endpoint", endpoint,
                      "--protocol", protocol)
    assert result.exit_code == 1
    assert (f"wrote 0 of 6 spans: the endpoint {endpoint} refused the connection"
            in result.stderr), result.stderr


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(("status", "named"), [
    (400, ("HTTP 400", "INVALID_ARGUMENT")), (403, ("HTTP 403", "PERMISSION_DENIED")),
    (500, ("HTTP 500", "INTERNAL")), (503, ("HTTP 503", "UNAVAILABLE")),
])
def test_an_endpoint_that_refuses_every_request_exits_1_naming_its_answer(
        protocol: str, status: int, named: tuple[str, str], traces: Path, quick: Path,
        otlp_receiver: OTLPReceiver) -> None:
    otlp_receiver.fail_next(10_000, status=status)
    endpoint = (otlp_receiver.grpc_endpoint if protocol == "grpc"
                else otlp_receiver.http_endpoint)
    result = _rescore(str(traces), "-s", "similarity", "-c", str(quick), "--endpoint", endpoint,
                      "--protocol", protocol)
    assert result.exit_code == 1
    assert f"wrote 0 of 6 spans: the endpoint {endpoint} " in result.stderr, result.stderr
    assert named[protocol == "grpc"] in result.stderr
    assert otlp_receiver.requests and not otlp_receiver.spans


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_endpoint_that_recovers_gets_everything_and_the_run_succeeds(
        protocol: str, traces: Path, quick: Path, otlp_receiver: OTLPReceiver) -> None:
    otlp_receiver.fail_next(2, status=503)
    endpoint = (otlp_receiver.grpc_endpoint if protocol == "grpc"
                else otlp_receiver.http_endpoint)
    result = _rescore(str(traces), "-s", "similarity", "--endpoint", endpoint,
                      "--protocol", protocol)
    assert result.exit_code == 0, result.output
    assert "wrote 6 spans" in result.stdout and "of 6 spans" not in result.stderr
    assert len(otlp_receiver.wait_for_spans(6, timeout=10)) == 6


class _PartialEndpoint:
    """A real OTLP/HTTP endpoint that rejects the first `reject` spans it is sent
    (partial_success) and takes the others."""

    def __init__(self, reject: int) -> None:
        self.to_reject = reject
        self.taken = 0
        lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest.FromString(body)
                spans = sum(len(ss.spans) for rs in request.resource_spans
                            for ss in rs.scope_spans)
                with lock:
                    rejected = min(owner.to_reject, spans)
                    owner.to_reject -= rejected
                    owner.taken += spans - rejected
                reply = ExportTraceServiceResponse()
                if rejected:
                    reply.partial_success.rejected_spans = rejected
                    reply.partial_success.error_message = "spans too old"
                data = reply.SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def partial() -> Iterator[Any]:
    endpoints: list[_PartialEndpoint] = []

    def start(reject: int) -> _PartialEndpoint:
        endpoints.append(_PartialEndpoint(reject))
        return endpoints[-1]

    yield start
    for endpoint in endpoints:
        endpoint.close()


@pytest.mark.parametrize("reject", [1, 4, 6])
def test_an_endpoint_that_takes_part_exits_1_with_what_it_took(reject: int, traces: Path,
                                                             partial: Any) -> None:
    endpoint = partial(reject)
    result = _rescore(str(traces), "-s", "similarity", "--endpoint", endpoint.endpoint,
                      "--protocol", "http/protobuf")
    assert result.exit_code == 1
    assert endpoint.taken == 6 - reject
    assert (f"wrote {6 - reject} of 6 spans: the endpoint {endpoint.endpoint} rejected {reject} "
            f"(partial success)") in result.stderr, result.stderr


# --- bad input ----------------------------------------------------------------------------------
def _valid_line() -> dict[str, Any]:
    return {"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "app"}}]},
        "scopeSpans": [{"scope": {"name": "t"}, "spans": [{
            "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
            "name": "invoke_agent geo", "kind": 1,
            "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000001000000000",
            "attributes": [{"key": k, "value": {"stringValue": v}}
                           for k, v in agent_attributes().items()],
            "events": [{"timeUnixNano": "1700000000500000000", "name": "e",
                        "attributes": [{"key": "n", "value": {"intValue": "3"}}]}],
            "status": {"code": 1}}]}]}]}


def _paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    items = node.items() if isinstance(node, dict) else enumerate(node) \
        if isinstance(node, list) else ()
    for key, value in items:
        yield from _paths(value, (*path, key))


def _replaced(tree: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copy = json.loads(json.dumps(tree))
    node = copy
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return copy


def _at(tree: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        tree = tree[key]
    return tree


_VALID = _valid_line()
_values = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=4),
                    st.lists(st.integers(0, 9), max_size=2),
                    st.dictionaries(st.sampled_from(["a", "value", "spans"]), st.integers(0, 3),
                                    max_size=2))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(list(_paths(_VALID))), value=_values)
def test_a_line_with_a_wrong_type_anywhere_exits_2_naming_file_and_line(
        path: tuple[Any, ...], value: Any, tmp_path: Path) -> None:
    old = _at(_VALID, path)
    assume(type(value) is not type(old))  # a type mutation
    bad = tmp_path / "bad.jsonl"
    lines = [_VALID, _replaced(_VALID, path, value), _VALID]
    bad.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = _rescore(str(bad), "-s", "similarity", "-o", str(tmp_path / "out.jsonl"))
    if result.exit_code == 2:
        assert result.stderr.startswith(f"Error: {bad}:2: "), result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    else:  # a value the OTLP JSON mapping takes (a number as a string, null for a default ...)
        assert result.exit_code == 0, result.output
        assert "read 3 spans" in result.stdout or f"warning: {bad}:2: " in result.stderr


@pytest.mark.parametrize(("line", "says"), [
    ('{"resourceSpans": 5}', "not an OTLP JSON trace request"),
    ('{"resourceSpans": "x"}', "not an OTLP JSON trace request"),
    ('{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": 5}]}]}]}', "traceId"),
    ('{"resourceSpans": [{"scopeSpans": [{"spans": [{"spanId": "eee19b7ec3c1b174"}]}]}]}',
     "traceId must be 32 hex digits"),
    (('{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": '
      '"5b8efff798038103d269b633813fc60c", "spanId": "ee"}]}]}]}'), "spanId must be 16 hex digits"),
    ("[1]", "JSON array, not an object"),
    ("5", "JSON number, not an object"),
    ('"text"', "JSON string, not an object"),
    ("null", "JSON null, not an object"),
    ("{not json", "not JSON"),
    (b"\xff\xfe", "not JSON"),
    ("[" * 3000 + "]" * 3000, "not"),
    ('{"a": ' * 3000 + "1" + "}" * 3000, "not"),
])
def test_malformed_lines_exit_2_naming_file_and_line(line: str | bytes, says: str, traces: Path,
                                                     tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    raw = line if isinstance(line, bytes) else line.encode()
    bad.write_bytes(traces.read_bytes() + raw + b"\n")
    number = len(traces.read_bytes().splitlines()) + 1
    result = _rescore(str(bad), "-s", "similarity", "-o", str(tmp_path / "out.jsonl"))
    assert result.exit_code == 2
    (message,) = result.stderr.strip().splitlines()
    assert message.startswith(f"Error: {bad}:{number}: ") and says in message, message


@pytest.mark.parametrize("lines", [1, 7])
def test_lines_without_spans_are_warnings_naming_them(lines: int, traces: Path,
                                                     tmp_path: Path) -> None:
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text('{"not": "otlp"}\n' * lines + traces.read_text())
    result = _rescore(str(mixed), "-s", "similarity", "-o", str(tmp_path / "out.jsonl"))
    assert result.exit_code == 0 and "read 18 spans" in result.stdout
    warned = [w for w in result.stderr.splitlines() if "no resourceSpans" in w]
    assert warned == [f"warning: {mixed}:{n}: no resourceSpans in this line (keys: not): not an "
                      f"OTLP trace request; skipped" for n in range(1, min(lines, 5) + 1)]
    assert (f"warning: {lines - 5} more lines held no spans" in result.stderr) == (lines > 5)


@pytest.mark.parametrize("content", ['{"not": "otlp"}\n', '{"resourceSpans": []}\n', "\n", ""])
def test_inputs_without_any_span_exit_2(content: str, tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text(content)
    result = _rescore(str(empty), "-o", str(tmp_path / "out.jsonl"))
    assert result.exit_code == 2
    assert f"Error: {empty}: no spans found; nothing to rescore" in result.stderr


# --- a ground truth the spans do not carry --------------------------------------------------------
def _warnings(result: Result, scorer_id: str) -> list[str]:
    return [w for w in result.stderr.splitlines()
            if w.startswith(f"warning: {scorer_id} had no ground truth")]


@pytest.mark.parametrize(("scorer", "scorer_id"), [
    ("similarity", "content-similarity"), ("textual-difference", "textual-difference"),
    ("keyword-coverage", "keyword-coverage"), ("completeness", "completeness"),
    ("tone", "tone-consistency"), ("relevancy", "answer-relevancy"),  # the offline judge
])
def test_scorers_that_compare_with_a_ground_truth_warn_once_when_there_is_none(
        scorer: str, scorer_id: str, tmp_path: Path) -> None:
    without = _write_traces(tmp_path / "without.jsonl")
    result = _rescore(str(without), "-s", scorer, "-o", str(tmp_path / "a.jsonl"))
    assert result.exit_code == 0, result.output
    (warning,) = _warnings(result, scorer_id)
    assert "for 6 agent spans" in warning and "reference: FILE" in warning
    with_truth = _write_traces(tmp_path / "with.jsonl", ground_truth=True)
    result = _rescore(str(with_truth), "-s", scorer, "-o", str(tmp_path / "b.jsonl"))
    assert result.exit_code == 0 and not _warnings(result, scorer_id), result.output


@pytest.mark.parametrize("scorer", ["toxicity", "hallucination", "faithfulness"])
def test_scorers_that_need_no_ground_truth_do_not_warn(scorer: str, traces: Path,
                                                       tmp_path: Path) -> None:
    result = _rescore(str(traces), "-s", scorer, "-o", str(tmp_path / "out.jsonl"))
    assert result.exit_code == 0 and "ground truth" not in result.stderr, result.output


@pytest.mark.parametrize("known", [1, 2, 3])
def test_a_reference_file_in_the_config_fills_in_what_it_knows(known: int, tmp_path: Path) -> None:
    traces = _write_traces(tmp_path / "without.jsonl")
    reference = tmp_path / "reference.jsonl"
    reference.write_text("".join(json.dumps({"input": q, "ground_truth": a}) + "\n"
                                 for q, a in QUESTIONS[:known]))
    config = tmp_path / "gateway.yaml"
    config.write_text("scoring:\n  scorers:\n    - {scorer: similarity, reference: "
                      "reference.jsonl}\n")
    result = _rescore(str(traces), "-c", str(config), "-o", str(tmp_path / "out.jsonl"))
    assert result.exit_code == 0, result.output
    missing = 6 - 2 * known  # every question is asked twice
    warnings = _warnings(result, "content-similarity")
    assert len(warnings) == (1 if missing else 0)
    if missing:
        assert f"for {missing} agent spans" in warnings[0] and "nor its reference" in warnings[0]


def test_rescoring_the_demos_own_file_warns(tmp_path: Path) -> None:
    demo = tmp_path / "demo.jsonl"
    subprocess.run([sys.executable, "-m", "tracescore", "demo", "--spans-file", str(demo)],
                   cwd=tmp_path, capture_output=True, check=True, timeout=120)
    # the demo scored them with these scorers: --force scores them again
    result = _rescore(str(demo), "-o", str(tmp_path / "out.jsonl"), "--force")
    assert result.exit_code == 0, result.output
    for scorer_id in ("answer-relevancy", "content-similarity"):
        (warning,) = _warnings(result, scorer_id)
        assert "for 6 agent spans" in warning


@pytest.mark.parametrize("asked", [
    [{"role": "user", "content": QUESTIONS[0][0]}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": QUESTIONS[0][0]}],
    [{"role": "user", "content": [{"type": "text", "text": QUESTIONS[0][0]}]}],
    {"messages": [{"role": "user", "content": QUESTIONS[0][0]}]},
])
def test_a_reference_keyed_by_the_question_matches_chat_messages(asked: Any) -> None:
    from tracescore.online import OnlineScorer
    from tracescore.scoring import ContentSimilarityScorer

    online = OnlineScorer(ContentSimilarityScorer(), reference=dict(QUESTIONS))
    assert online.lookup_reference(asked) == QUESTIONS[0][1]
