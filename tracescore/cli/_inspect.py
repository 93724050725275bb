"""The work behind `tracescore inspect`: read OTLP JSON lines files, or receive OTLP for a while,
and print what would be scored of each agent-like span, or why not (cli/_app.py parses options)."""

from __future__ import annotations

import errno
import json
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from tracescore._exceptions import ConfigurationError
from tracescore.gateway._inspect import Inspector, SpanReport

_SHOWN_CHARS = 400  # of a question, answer or context text in the text output


def run_inspect_command(inputs: Sequence[Path], *, config_file: Path | None, as_json: bool,
                        all_spans: bool, listen: bool, grpc_endpoint: str | None,
                        http_endpoint: str | None, seconds: float,
                        warn: Callable[[str], None]) -> None:
    """Inspect `inputs` (or, with `listen`, what arrives within `seconds`) and print the reports;
    `ConfigurationError` for a bad option or input line ("FILE:LINE: ...")."""
    from tracescore.gateway._config import load_gateway_config

    config = load_gateway_config(config_file, environ={})
    inspector = Inspector(config.recognisers or (), keep_others=all_spans)
    if listen:
        _listen(inspector, config, grpc_endpoint, http_endpoint, seconds)
    else:
        _read(inspector, inputs, warn)
    reports = inspector.reports()
    if as_json:
        payload = {"spans": inspector.spans, "agent_spans": [r.to_dict() for r in reports],
                   "other_spans": inspector.other_count}
        if all_spans:
            payload["others"] = [{"where": where, "name": name}
                                 for where, name in inspector.others]
        sys.stdout.write(json.dumps(payload, ensure_ascii=False, indent=2, default=str) + "\n")
        return
    for report in reports:
        click.echo(_text(report))
    if all_spans:
        for where, name in inspector.others:
            click.echo(f"{where}  {name!r}: not an agent call")
    click.echo(_summary(inspector.spans, reports, inspector.other_count, all_spans))


def _read(inspector: Inspector, inputs: Sequence[Path], warn: Callable[[str], None]) -> None:
    from tracescore.gateway._rescore_input import LineReader

    reader = LineReader(inputs, warn, on_logs=lambda tree: _add_logs(inspector, tree,
                                                                      reader.where))
    for request, _ in reader.requests():
        inspector.add(request, reader.where)
    if not inspector.spans:
        names = ", ".join(str(path) for path in inputs)
        raise ConfigurationError(f"{names}: no spans found (expected OTLP JSON lines with "
                                 f"resourceSpans, as the file exporters write)")


def _add_logs(inspector: Inspector, tree: dict[str, Any], where: str) -> None:
    """A line of OTLP logs: its GenAI content records go to the inspector."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    from tracescore._exceptions import OtlpJsonError
    from tracescore._otlp_json import parse_otlp_json

    try:
        request = parse_otlp_json(tree, ExportLogsServiceRequest())
    except OtlpJsonError as exc:
        raise ConfigurationError(f"{where}: not an OTLP JSON logs request: {exc}") from None
    inspector.add_logs(request)


class _Door:
    """The gateway receivers' door, handing every request to the inspector."""

    def __init__(self, inspector: Inspector) -> None:
        self._inspector = inspector

    def receive(self, request: Any, raw: bytes | None) -> None:
        self._inspector.add(request)

    def receive_logs(self, request: Any, raw: bytes | None) -> None:
        self._inspector.add_logs(request, raw)  # GenAI content records, joined to their spans

    def rejected(self) -> None:
        pass

    def health(self) -> tuple[bool, dict[str, Any]]:
        return True, {}

    def prometheus(self) -> str:
        return ""

    def connection_closed(self, reason: str) -> None:
        pass


def _listen(inspector: Inspector, config: Any, grpc_endpoint: str | None,
            http_endpoint: str | None, seconds: float) -> None:
    """Receive OTLP on the gateway's receivers for `seconds` (or until Ctrl-C)."""
    from tracescore.gateway._config_keys import host_port
    from tracescore.gateway._receiver import Limits, grpc_receiver, http_receiver, listen

    grpc_address = host_port(grpc_endpoint, "--grpc-endpoint") if grpc_endpoint else None
    http_address = host_port(http_endpoint, "--http-endpoint") if http_endpoint else None
    if grpc_address is None and http_address is None:
        raise ConfigurationError("--listen needs --grpc-endpoint or --http-endpoint")
    limits = Limits(config.max_request_bytes, config.max_decompressed_bytes, config.retry_after_s)
    door = _Door(inspector)
    servers: list[Any] = []
    grpc_server = None
    try:
        if grpc_address is not None:
            address = grpc_address
            grpc_server, port = _bound("--grpc-endpoint", grpc_endpoint,
                                       lambda: grpc_receiver(address, door, limits, tls=None))
            click.echo(f"listening for OTLP/gRPC on {address[0]}:{port}", err=True)
        if http_address is not None:
            sock = _bound("--http-endpoint", http_endpoint, lambda: listen(http_address))
            server = http_receiver(sock, door, limits, None)
            servers.append(server)
            server.start()
            click.echo(f"listening for OTLP/HTTP on {http_address[0]}:{server.port}", err=True)
        click.echo(f"for {seconds:g} s (Ctrl-C to stop earlier)", err=True)
        stop = threading.Event()
        try:
            stop.wait(seconds)
        except KeyboardInterrupt:
            pass
    finally:
        if grpc_server is not None:
            grpc_server.stop(grace=1.0).wait(timeout=5)
        for server in servers:
            server.close()
    from tracescore._words import counted

    logged = (f" and {counted(inspector.log_records, 'GenAI content log record')}"
              if inspector.log_records else "")
    click.echo(f"received {counted(inspector.requests, 'request')}{logged}", err=True)


def _bound(option: str, endpoint: str | None, bind: Callable[[], Any]) -> Any:
    """`bind()`, its OSError as a `ConfigurationError` naming the option (as `serve` does)."""
    try:
        return bind()
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise ConfigurationError(f"{option}: {endpoint} is already in use") from None
        raise ConfigurationError(f"{option}: cannot listen on {endpoint}: "
                                 f"{exc.strerror or exc}") from None


# --- text output ----------------------------------------------------------------------------------
def _text(report: SpanReport) -> str:
    head = f"{report.where}  span {report.name!r}  trace {report.trace_id}"
    lines = [f"{head}  span id {report.span_id}"]
    if report.scored:
        lines.append(f"  would be scored: convention {report.framework}, agent {report.agent}")
        lines.append(f"  question:      {_short(report.question)}")
        lines.append(f"  answer:        {_short(report.answer)}")
        if report.conversation:
            roles = ", ".join(m["role"] for m in report.conversation)
            lines.append(f"  earlier:       {len(report.conversation)} messages before the "
                         f"question ({roles})")
        if report.ground_truth is not None:
            lines.append(f"  ground truth:  {_short(report.ground_truth)}")
        for call in report.tool_calls:
            result = (f"error {call['error']}" if "error" in call else _short(call["result"]))
            lines.append(f"  tool call:     {call['name']}({_short(call['arguments'])}) -> {result}")
        for text in report.context:
            lines.append(f"  context:       {_short(text)}")
        lines.extend(f"  warning:       {warning}" for warning in report.warnings)
        if report.mapping:
            lines.append("  found by the trace's shape (no agent marker); a recognise.mappings "
                         "entry that reads it by name:")
            lines.extend("    " + line for line in _yaml_entry(report.mapping).splitlines())
        return "\n".join(lines)
    lines.append(f"  NOT scored (looks like an agent call: {report.framework}): {report.why}")
    lines.append(f"  attribute keys: {', '.join(report.attribute_keys) or 'none'}")
    mapping = report.mapping or {}
    missing = [key for key in ("input", "output") if mapping.get(key) is None]
    if missing:
        lines.append(f"  no attribute looks like its {' or '.join(missing)}: the span carries no "
                     f"content to map (set it on the span, e.g. as {' and '.join(missing)} "
                     f"attributes, then map them)")
    else:
        lines.append("  a recognise.mappings entry that reads it (in the --config file of "
                     "serve, rescore and inspect):")
        lines.extend("    " + line for line in _yaml_entry(mapping).splitlines())
    return "\n".join(lines)


def _yaml_entry(mapping: dict[str, Any]) -> str:
    import yaml

    return str(yaml.safe_dump({"recognise": {"mappings": [mapping]}}, sort_keys=False,
                              allow_unicode=True, default_flow_style=False))


def _short(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split()) if "\n" in text else text
    if len(text) > _SHOWN_CHARS:
        return f"{text[:_SHOWN_CHARS]}… ({len(text)} characters)"
    return text


def _summary(spans: int, reports: Sequence[SpanReport], others: int, all_spans: bool) -> str:
    scored = sum(r.scored for r in reports)
    from tracescore._words import counted

    look = "looks like an agent call" if len(reports) == 1 else "look like agent calls"
    line = (f"{counted(spans, 'span')}: {len(reports)} {look} ({scored} would be scored, "
            f"{len(reports) - scored} not), {counted(others, 'other span')}")
    return line if all_spans or not others else f"{line} (--all lists them)"
