"""`PhoenixSink`: scorer results as Arize Phoenix span annotations (`POST /v1/span_annotations`),
and a run-scope scorer's results as trace annotations (`POST /v1/trace_annotations`) and a
conversation's results also as session annotations (`POST /v1/session_annotations`).

Phoenix then shows each score on the evaluated span (a run's on its trace), as a column of its
span (trace) table, in its filters (`annotations['answer-relevancy'].score < 0.5`) and in the
project's stats. The span events stay as they are; this sink adds Phoenix's native view.
(Phoenix's REST API also takes document annotations.)

Records are queued (bounded; a full queue drops and counts), sent in batches by one daemon
thread, and retried with exponential backoff on connection errors, 408, 429 and 5xx (honouring
Retry-After). The agent never waits for Phoenix. Annotations are upserts keyed by span, name and
identifier, so a retried batch never duplicates one. A conversation's result is annotated on its
last turn's span and on the Phoenix session named by its conversation id, with the identifier
`turns=<n>`: each version is a new annotation, a retried one replaces itself. (Phoenix makes a
session of the spans that carry `session.id`; a session annotation for an id it has no session
of is dropped by Phoenix.)
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Mapping
from typing import Any

from tracescore import _semconv as sc
from tracescore._exceptions import ConfigurationError
from tracescore._guard import Guard
from tracescore._suppress import suppressed
from tracescore.online._records import ScoreRecord

_log = logging.getLogger("tracescore")

# Phoenix's own client settings (the same variables its SDKs read, in the same order)
ENV_ENDPOINT = "PHOENIX_ENDPOINT"
ENV_COLLECTOR_ENDPOINT = "PHOENIX_COLLECTOR_ENDPOINT"
ENV_API_KEY = "PHOENIX_API_KEY"
ENV_HEADERS = "PHOENIX_CLIENT_HEADERS"
DEFAULT_ENDPOINT = "http://localhost:6006"
ANNOTATIONS_PATH = "/v1/span_annotations"
TRACE_ANNOTATIONS_PATH = "/v1/trace_annotations"  # a run-scope scorer's: the whole trace
SESSION_ANNOTATIONS_PATH = "/v1/session_annotations"  # a conversation's: its session
ERROR_LABEL = "error"  # label of a failed run's annotation (its explanation says why)

_RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_MAX_BACKOFF_S = 30.0
_OTLP_SUFFIX = "/v1/traces"  # PHOENIX_COLLECTOR_ENDPOINT may name the OTLP path

# metadata key -> attribute of the gen_ai.evaluation.result event
_METADATA: tuple[tuple[str, str], ...] = (
    ("run_id", sc.TS_RUN_ID),
    ("judge_model", sc.TS_JUDGE_MODEL),
    ("judge_cost_usd", sc.TS_JUDGE_COST_USD),
    ("judge_calls", sc.TS_JUDGE_CALLS),
    ("judge_input_tokens", sc.TS_JUDGE_INPUT_TOKENS),
    ("judge_output_tokens", sc.TS_JUDGE_OUTPUT_TOKENS),
    ("judge_latency_ms", sc.TS_JUDGE_LATENCY_MS),
    ("sampling_rate", sc.TS_SAMPLING_RATE),
    ("error_type", sc.ERROR_TYPE),
    ("failed_step", sc.TS_FAILED_STEP),
)


def session_annotation(record: ScoreRecord) -> dict[str, Any] | None:
    """The Phoenix session annotation of a conversation's result (None for other results)."""
    attrs = record.attributes
    session = attrs.get(sc.GEN_AI_CONVERSATION_ID)
    turns = attrs.get(sc.TS_CONVERSATION_TURNS)
    if session is None or turns is None:
        return None
    item = annotation(record)
    del item["span_id"]
    item["metadata"].update(turns=turns, first_turn=attrs.get(sc.TS_CONVERSATION_FIRST_TURN),
                            last_turn=attrs.get(sc.TS_CONVERSATION_LAST_TURN))
    return {"session_id": str(session), **item, "identifier": f"turns={turns}"}


def annotation(record: ScoreRecord) -> dict[str, Any]:
    """The Phoenix annotation (REST body item) of one score record: a span annotation, or for
    a run-scope scorer a trace annotation (see `annotation_path`)."""
    attrs = record.attributes
    result: dict[str, Any] = {}
    score = attrs.get(sc.GEN_AI_EVALUATION_SCORE_VALUE)
    if isinstance(score, (int, float)) and not isinstance(score, bool):
        result["score"] = float(score)
    label = attrs.get(sc.GEN_AI_EVALUATION_SCORE_LABEL)
    if label is None and sc.ERROR_TYPE in attrs:
        label = ERROR_LABEL
    if label is not None:
        result["label"] = str(label)
    explanation = attrs.get(sc.GEN_AI_EVALUATION_EXPLANATION)
    if explanation is not None:
        result["explanation"] = str(explanation)
    metadata: dict[str, Any] = {"scorer_name": record.scorer_name,
                                "scorer_version": record.scorer_version,
                                "trace_id": f"{record.trace_id:032x}"}
    for key, attribute in _METADATA:
        value = attrs.get(attribute)
        if value is not None:
            metadata[key] = value
    body = {
        "name": record.scorer_id,  # the stable id: `annotations['answer-relevancy'].score < 0.5`
        "annotator_kind": "LLM" if record.judged else "CODE",
        "result": result,
        "metadata": metadata,
        "identifier": "",
    }
    if record.scope == "run":
        metadata["root_span_id"] = f"{record.span_id:016x}"
        return {"trace_id": f"{record.trace_id:032x}", **body}
    return {"span_id": f"{record.span_id:016x}", **body}


def annotation_path(item: Mapping[str, Any]) -> str:
    """Where an annotation is posted: session and trace annotations to theirs, the others to
    spans'."""
    if "session_id" in item:
        return SESSION_ANNOTATIONS_PATH
    return TRACE_ANNOTATIONS_PATH if "span_id" not in item else ANNOTATIONS_PATH


class PhoenixSink:
    """Sends scorer results to Phoenix as span annotations (sink name "phoenix").

    `endpoint`: Phoenix's base URL; default $PHOENIX_ENDPOINT, else $PHOENIX_COLLECTOR_ENDPOINT
    (an OTLP `/v1/traces` suffix is ignored), else http://localhost:6006.
    `api_key`: sent as `Authorization: Bearer ...`; default $PHOENIX_API_KEY.
    `headers`: extra HTTP headers; default from $PHOENIX_CLIENT_HEADERS (`k=v,k2=v2`).
    `batch_size` annotations per request, `queue_size` records waiting at most (beyond: dropped,
    counted), `flush_interval_s` longest wait before a partial batch is sent, `max_retries` per
    batch, `timeout_s` per request.
    """

    name = "phoenix"

    def __init__(self, endpoint: str | None = None, *, api_key: str | None = None,
                 headers: Mapping[str, str] | None = None, batch_size: int = 100,
                 queue_size: int = 10_000, flush_interval_s: float = 1.0, max_retries: int = 5,
                 timeout_s: float = 10.0) -> None:
        self.endpoint = _endpoint(endpoint)
        self._headers = _headers(api_key, headers)
        self._batch_size = _positive_int("batch_size", batch_size)
        self._queue_size = _positive_int("queue_size", queue_size)
        self._max_retries = _count("max_retries", max_retries)
        self._flush_interval = _positive_number("flush_interval_s", flush_interval_s)
        self._timeout = _positive_number("timeout_s", timeout_s)
        self._init_state()

    def _init_state(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[dict[str, Any]] = deque()
        self._in_flight = 0
        self._flushing = False
        self._closed = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._counts = {"sent": 0, "dropped": 0, "dropped.queue_full": 0,
                        "dropped.rejected": 0, "dropped.retries_exhausted": 0,
                        "dropped.shutdown": 0, "retries": 0}
        self._guard = Guard(_log)  # logs each failing site once

    # --- the agent's side: never blocks, never raises ---------------------------------------------
    def emit(self, record: ScoreRecord) -> None:
        """Queue `record` for Phoenix (dropped and counted when the queue is full or closed)."""
        try:
            if self._pid != os.getpid():  # forked: the parent's thread and queue are not ours
                self._init_state()
            items = [annotation(record)]
            session = session_annotation(record)
            if session is not None:
                items.append(session)
            with self._cond:
                if self._closed or len(self._queue) >= self._queue_size:
                    self._drop("shutdown" if self._closed else "queue_full", len(items))
                    full = not self._closed
                else:
                    self._queue.extend(items)
                    full = False
                    if len(self._queue) >= self._batch_size:
                        self._cond.notify_all()
                    if self._thread is None:
                        self._thread = threading.Thread(
                            target=self._run, name="tracescore-phoenix", daemon=True
                        )
                        self._thread.start()
            if full:
                self._guard.once("full", "tracescore: Phoenix annotation queue is full (%d); "
                               "dropping annotations (counted in stats)", self._queue_size)
        except Exception:  # noqa: BLE001 - telemetry never raises into the caller
            self._guard.once("emit", "tracescore: could not queue a Phoenix annotation",
                           exc_info=True)

    def stats(self) -> dict[str, int]:
        """Counters: sent, dropped (and dropped.<reason>), retries; gauge: queued."""
        with self._cond:
            return {**self._counts, "queued": len(self._queue) + self._in_flight}

    def force_flush(self, timeout_s: float = 30.0) -> bool:
        """Send what is queued now; True when all of it left the queue within `timeout_s`."""
        with self._cond:
            if self._thread is None:
                return not self._queue
            self._flushing = True
            self._cond.notify_all()
            done = self._cond.wait_for(lambda: not self._queue and not self._in_flight,
                                       timeout=max(0.0, timeout_s))
            self._flushing = False
            return bool(done)

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Send what is queued (bounded by `timeout_s`), then stop; later records are dropped.
        Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
        deadline = time.monotonic() + max(0.0, timeout_s)
        self.force_flush(timeout_s)
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        thread = self._thread
        if thread is not None:
            thread.join(max(0.0, deadline - time.monotonic()) + 0.1)
        with self._cond:
            left = len(self._queue)
            self._queue.clear()
            self._drop("shutdown", left)

    # --- the sending thread -----------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(
                    lambda: self._stop.is_set() or self._flushing
                    or len(self._queue) >= self._batch_size,
                    timeout=self._flush_interval,
                )
                if self._stop.is_set():
                    return
                batch = [self._queue.popleft()
                         for _ in range(min(self._batch_size, len(self._queue)))]
                self._in_flight = len(batch)
            try:
                for path in sorted({annotation_path(item) for item in batch}):
                    self._send([item for item in batch if annotation_path(item) == path],
                               path)
            except Exception:  # noqa: BLE001 - the thread must outlive any one batch
                self._guard.once("send", "tracescore: sending Phoenix annotations failed",
                               exc_info=True)
                with self._cond:
                    self._drop("rejected", len(batch))
            finally:
                with self._cond:
                    self._in_flight = 0
                    self._cond.notify_all()

    def _send(self, batch: list[dict[str, Any]], path: str = ANNOTATIONS_PATH) -> None:
        body = json.dumps({"data": batch}, separators=(",", ":")).encode()
        for attempt in range(self._max_retries + 1):
            status, retry_after, detail = self._post(body, path)
            if status is not None and 200 <= status < 300:
                with self._cond:
                    self._counts["sent"] += len(batch)
                return
            if status is not None and status not in _RETRY_STATUSES:
                self._guard.once(f"status:{status}", "tracescore: Phoenix refused annotations "
                               "(HTTP %s: %s); dropping them", status, detail)
                with self._cond:
                    self._drop("rejected", len(batch))
                return
            if attempt == self._max_retries:
                break
            with self._cond:
                self._counts["retries"] += 1
            delay = retry_after if retry_after is not None else min(
                _MAX_BACKOFF_S, 0.5 * 2 ** attempt) * random.uniform(0.5, 1.0)
            if self._stop.wait(delay) or self._closed:
                break  # shutting down: no more waiting for Phoenix
        self._guard.once("retries", "tracescore: Phoenix at %s unreachable (%s); dropping "
                       "annotations after retries", self.endpoint, detail)
        with self._cond:
            self._drop("shutdown" if self._closed else "retries_exhausted", len(batch))

    def _post(self, body: bytes, path: str) -> tuple[int | None, float | None, str]:
        """(HTTP status or None for a transport error, Retry-After seconds, short detail)."""
        request = urllib.request.Request(self.endpoint + path + "?sync=false", data=body,
                                         method="POST", headers=self._headers)
        try:
            with suppressed(), urllib.request.urlopen(request, timeout=self._timeout) as response:
                response.read()
                return int(response.status), None, "ok"
        except urllib.error.HTTPError as exc:
            detail = exc.read(300).decode("utf-8", "replace") if exc.fp is not None else ""
            return exc.code, _retry_after(exc.headers.get("Retry-After")), detail or exc.reason
        except (urllib.error.URLError, OSError, ValueError) as exc:
            return None, None, f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"

    def _drop(self, reason: str, count: int) -> None:
        """Count `count` dropped annotations (caller holds the lock)."""
        if count:
            self._counts["dropped"] += count
            self._counts[f"dropped.{reason}"] += count


# --- configuration -------------------------------------------------------------------------------
def _endpoint(given: str | None) -> str:
    key = "PhoenixSink endpoint"
    raw = given
    if raw is None:
        key = next((var for var in (ENV_ENDPOINT, ENV_COLLECTOR_ENDPOINT) if os.environ.get(var)),
                   "")
        raw = os.environ[key] if key else DEFAULT_ENDPOINT
    if not isinstance(raw, str):
        raise ConfigurationError(f"{key} must be an http(s) URL string, got {raw!r}")
    url = raw.strip()
    url = url.removesuffix("/").removesuffix(_OTLP_SUFFIX).rstrip("/")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigurationError(f"{key} must be an http(s) URL such as {DEFAULT_ENDPOINT}, "
                                 f"got {raw!r}")
    return url


def _headers(api_key: str | None, given: Mapping[str, str] | None) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "User-Agent": "tracescore-phoenix-sink"}
    if given is None:
        headers.update(_env_headers())
    elif isinstance(given, Mapping) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in given.items()
    ):
        headers.update(given)
    else:
        raise ConfigurationError("PhoenixSink headers must be a mapping of str to str")
    key = api_key if api_key is not None else os.environ.get(ENV_API_KEY)
    if key is not None:
        if not isinstance(key, str) or not key.strip():
            name = "PhoenixSink api_key" if api_key is not None else ENV_API_KEY
            raise ConfigurationError(f"{name} must be a non-empty string")
        headers["Authorization"] = f"Bearer {key.strip()}"
    return headers


def _env_headers() -> dict[str, str]:
    raw = os.environ.get(ENV_HEADERS, "")
    headers: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigurationError(f"{ENV_HEADERS} must be comma-separated name=value pairs")
        headers[urllib.parse.unquote(name.strip())] = urllib.parse.unquote(value.strip())
    return headers


def _retry_after(value: str | None) -> float | None:
    try:
        return min(_MAX_BACKOFF_S, max(0.0, float(value))) if value else None
    except ValueError:  # an HTTP date: fall back to our own backoff
        return None


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"PhoenixSink {name} must be an integer >= 1, got {value!r}")
    return value


def _count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(f"PhoenixSink {name} must be an integer >= 0, got {value!r}")
    return value


def _positive_number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigurationError(f"PhoenixSink {name} must be a number > 0, got {value!r}")
    return float(value)
