"""Labels people gave in Arize Phoenix, read through its REST API as a calibration dataset.

The project's spans come from `GET /v1/projects/{project}/spans/otlpv1` (OTLP JSON, paged), the
agent calls among them are read by the built-in recognisers (question and answer as the scorers
read them), and their annotations named `annotation` from
`GET /v1/projects/{project}/span_annotations` (by span ids, in batches). Only annotations made by
people (annotator kind HUMAN) count unless told otherwise; of several on one span, the latest
updated counts. The label is the annotation's label, else its score.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

from tracescore._exceptions import ConfigurationError
from tracescore.cli._otlp import FileSpan, parse_span

ENV_API_KEY = "PHOENIX_API_KEY"
_PAGE = 1000
_IDS_PER_REQUEST = 50


def read_phoenix_labels(base_url: str, project: str, annotation: str, *,
                        annotator_kind: str | None = "HUMAN", api_key: str | None = None,
                        timeout: float = 30.0) -> list[dict[str, Any]]:
    """Calibration items (input, output, ground_truth, label, span_id, trace_id) of the agent
    calls of `project` that carry an annotation named `annotation`."""
    from tracescore.online import recognise
    from tracescore.scoring._inputs import InputError, answer_text, question_text

    client = _Client(base_url, api_key or os.environ.get(ENV_API_KEY), timeout)
    calls: dict[str, tuple[FileSpan, Any]] = {}
    for raw in client.pages(f"/v1/projects/{quote(project, safe='')}/spans/otlpv1"):
        span = parse_span(_without_nulls(raw))
        call = recognise(span.name, span.attributes)
        if call is not None:
            calls[span.span_id] = (span, call)
    labels = _labels(client, project, annotation, list(calls), annotator_kind)
    items = []
    for span_id, found in labels.items():
        span, call = calls[span_id]
        result = found.get("result") or {}
        label = result.get("label") if result.get("label") is not None else result.get("score")
        if label is None:
            continue
        try:
            question, answer = question_text(call.input), answer_text(call.output)
        except InputError:
            continue
        items.append({"input": question, "output": answer, "ground_truth": call.ground_truth,
                      "label": label, "explanation": result.get("explanation"),
                      "span_id": span_id, "trace_id": span.trace_id})
    return items


def read_phoenix_spans(base_url: str, project: str, *, api_key: str | None = None,
                       timeout: float = 30.0) -> list[FileSpan]:
    """Every span of `project` (OTLP JSON from Phoenix's REST API), as read from a file."""
    client = _Client(base_url, api_key or os.environ.get(ENV_API_KEY), timeout)
    return [parse_span(_without_nulls(raw))
            for raw in client.pages(f"/v1/projects/{quote(project, safe='')}/spans/otlpv1")]


def _labels(client: _Client, project: str, annotation: str, span_ids: list[str],
            annotator_kind: str | None) -> dict[str, dict[str, Any]]:
    """The latest annotation named `annotation` of each span (of the annotator kind)."""
    latest: dict[str, dict[str, Any]] = {}
    path = f"/v1/projects/{quote(project, safe='')}/span_annotations"
    for start in range(0, len(span_ids), _IDS_PER_REQUEST):
        batch = span_ids[start:start + _IDS_PER_REQUEST]
        params = [("span_ids", s) for s in batch] + [("include_annotation_names", annotation)]
        for found in client.pages(path, params):
            if annotator_kind and found.get("annotator_kind") != annotator_kind:
                continue
            span_id = found.get("span_id")
            if span_id in latest and str(latest[span_id].get("updated_at")) >= str(
                    found.get("updated_at")):
                continue
            latest[str(span_id)] = found
    return latest


def _without_nulls(node: Any) -> Any:
    """OTLP JSON without the null members Phoenix writes (`"bool_value": null` beside the value
    that is set)."""
    if isinstance(node, dict):
        return {k: _without_nulls(v) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [_without_nulls(v) for v in node]
    return node


class _Client:
    """GETs of Phoenix's REST API with its cursor paging; errors as ConfigurationError."""

    def __init__(self, base_url: str, api_key: str | None, timeout: float) -> None:
        import requests

        self._base = base_url.rstrip("/")
        self._session = requests.Session()
        if api_key:
            self._session.headers["Authorization"] = f"Bearer {api_key}"
        self._timeout = timeout

    def pages(self, path: str, params: list[tuple[str, str]] | None = None
              ) -> Iterator[dict[str, Any]]:
        import requests

        cursor: str | None = None
        while True:
            query = [*(params or []), ("limit", str(_PAGE))]
            if cursor:
                query.append(("cursor", cursor))
            url = f"{self._base}{path}"
            try:
                response = self._session.get(url, params=query, timeout=self._timeout)
            except requests.RequestException as exc:
                raise ConfigurationError(f"Phoenix at {self._base}: {exc}") from None
            if response.status_code == 404:
                raise ConfigurationError(f"Phoenix at {self._base}: {path}: not found (is the "
                                         f"project name right?)")
            if response.status_code >= 400:
                raise ConfigurationError(f"Phoenix at {self._base}: {path}: HTTP "
                                         f"{response.status_code}: {response.text[:200]}")
            body = response.json()
            yield from body.get("data") or []
            cursor = body.get("next_cursor")
            if not cursor:
                return
