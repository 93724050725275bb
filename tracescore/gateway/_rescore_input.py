"""The input side of `tracescore rescore`: OTLP JSON lines read and checked line by line.

A line that is not JSON, not an object, not an OTLP trace request (a wrong type anywhere) or
holds a span without valid ids is a `ConfigurationError` "FILE:LINE: ..." (the command exits 2);
a line that parses but holds no span is reported through `warn` (at most `MAX_WARNINGS` times,
then once with the count of the rest).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracescore._exceptions import ConfigurationError
from tracescore._otlp_json import parse_otlp_json
from tracescore.gateway import _otlp

MAX_WARNINGS = 5
_MAX_DETAIL = 240  # characters of a parser's message quoted in an error


class LineReader:
    """Reads `paths` as OTLP JSON lines; counts the non-blank lines that held no span."""

    def __init__(self, paths: Sequence[Path], warn: Callable[[str], None],
                 on_logs: Callable[[dict[str, Any]], None] | None = None) -> None:
        self._paths = paths
        self._warn = warn
        self._on_logs = on_logs  # takes the lines of OTLP logs (`resourceLogs`), when given
        self.empty_lines = 0
        self.where = ""  # "FILE:LINE" of the request last read

    def requests(self) -> Iterator[tuple[ExportTraceServiceRequest, int]]:
        """Each line of each file as a request, with the bytes read so far (for progress)."""
        done = 0
        for path in self._paths:
            try:
                handle = path.open("rb")
            except OSError as exc:
                raise ConfigurationError(f"{path}: cannot read: {exc}") from None
            with handle:
                for number, line in enumerate(handle, 1):
                    done += len(line)
                    if not line.strip():
                        continue
                    where = self.where = f"{path}:{number}"
                    tree, request = parse_line(line, where)
                    if not _otlp.count_spans(request):
                        if self._on_logs is not None and "resourceLogs" in tree:
                            self._on_logs(tree)
                            continue
                        self._no_spans(where, tree)
                    yield request, done
        hidden = self.empty_lines - MAX_WARNINGS
        if hidden > 0:
            self._warn(f"{hidden} more lines held no spans")

    def _no_spans(self, where: str, tree: dict[str, Any]) -> None:
        self.empty_lines += 1
        if self.empty_lines > MAX_WARNINGS:
            return
        if "resourceSpans" in tree or "resource_spans" in tree:
            self._warn(f"{where}: no spans in this line; skipped")
        else:
            keys = ", ".join(sorted(map(str, tree))[:5]) or "none"
            self._warn(f"{where}: no resourceSpans in this line (keys: {keys}): not an OTLP trace "
                       f"request; skipped")


def parse_line(line: bytes, where: str) -> tuple[dict[str, Any], ExportTraceServiceRequest]:
    """(JSON object, request) of one line, or a `ConfigurationError` starting with `where`."""
    try:
        tree = json.loads(line)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise ConfigurationError(f"{where}: not JSON: {_detail(exc)}") from None
    if not isinstance(tree, dict):
        raise ConfigurationError(f"{where}: not an OTLP JSON trace request: the line is a "
                                 f"JSON {_json_type(tree)}, not an object")
    try:
        request = parse_otlp_json(tree, ExportTraceServiceRequest())
    except Exception as exc:  # noqa: BLE001 - the parser's ParseError, TypeError, RecursionError
        raise ConfigurationError(f"{where}: not an OTLP JSON trace request: "
                                 f"{_detail(exc)}") from None
    _check_ids(request, where)
    return tree, request


def _check_ids(request: ExportTraceServiceRequest, where: str) -> None:
    number = 0
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                number += 1
                if len(span.trace_id) != 16 or not any(span.trace_id):
                    raise ConfigurationError(f"{where}: span {number}: traceId must be 32 hex "
                                             f"digits, not all zero")
                if len(span.span_id) != 8 or not any(span.span_id):
                    raise ConfigurationError(f"{where}: span {number}: spanId must be 16 hex "
                                             f"digits, not all zero")
                if span.parent_span_id and len(span.parent_span_id) != 8:
                    raise ConfigurationError(f"{where}: span {number}: parentSpanId must be 16 "
                                             f"hex digits or absent")


def _detail(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= _MAX_DETAIL else text[:_MAX_DETAIL - 1] + "…"


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "null"
