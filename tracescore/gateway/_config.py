"""Gateway configuration: a YAML file, then environment variables, then command-line overrides,
validated once at start; every error is a `ConfigurationError` naming the key (`serve` exits 2).

    receivers: {grpc: 0.0.0.0:4317, http: 0.0.0.0:4318, health: 0.0.0.0:13133,
                bearer_token: ..., tls: {cert_file, key_file, client_ca_file},
                max_request_bytes: ..., max_decompressed_bytes: ...,
                read_timeout_s: 30, idle_timeout_s: 60, max_connections: 1000}
    exporter:  {endpoint, protocol: grpc | http/protobuf, headers, compression, timeout_s,
                ca_file, workers, max_batch_spans, max_batch_bytes, stuck_after_s}
    journal:   {path, sync: full | normal}
    limits:    {max_pending_spans, retry_after_s}
    scoring:   {judge_model, scorers: [...], max_wait_s, max_held_spans, queue_size,
                concurrency, shutdown_timeout_s, isolation}
    recognise: {builtins: true, mappings: [...]}
    trace:     {max_tool_calls, max_chars, max_spans, max_traces, max_bytes, max_age_s,
                llm_wait_s}
    telemetry: {metrics: false, logs: (auto), endpoint, protocol, interval_s}
    shutdown_timeout_s: 30
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from tracescore import _env
from tracescore._endpoints import check_endpoint
from tracescore._exceptions import ConfigurationError
from tracescore.gateway._split import MIN_MAX_BATCH_BYTES

PROTOCOLS = ("grpc", "http/protobuf")
COMPRESSIONS = ("gzip", "none")
_SCORER_KEYS = ("scorer", "options", "rate", "agents", "attributes", "rate_limit_per_minute",
                "budget_usd_per_hour", "reference", "sinks", "timeout_s")


@dataclass(frozen=True, kw_only=True)
class GatewayConfig:
    """Everything `Gateway` needs, validated. Endpoints are "host:port" (port 0: any free port;
    None: that receiver is off). `scorers`: `Scorer`/`OnlineScorer` objects (None: relevancy
    and content similarity at rate 1). `recognisers`: the chain (None: the built-in conventions).
    """

    grpc_endpoint: str | None = "0.0.0.0:4317"
    http_endpoint: str | None = "0.0.0.0:4318"
    health_endpoint: str | None = "0.0.0.0:13133"
    bearer_token: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_client_ca_file: str | None = None
    max_request_bytes: int = 16 << 20
    max_decompressed_bytes: int = 64 << 20
    read_timeout_s: float = 30.0
    idle_timeout_s: float = 60.0
    max_connections: int = 1000
    exporter_endpoint: str = "http://localhost:4317"
    exporter_protocol: str = "grpc"
    exporter_headers: Mapping[str, str] = field(default_factory=dict)
    exporter_compression: str = "none"
    exporter_timeout_s: float = 10.0
    exporter_ca_file: str | None = None
    forward_workers: int = 2
    max_batch_spans: int = 8192
    max_batch_bytes: int = 3584 << 10  # 3.5 MiB, under the Collector's 4 MiB gRPC default
    stuck_after_s: float = 300.0
    journal_path: str = "tracescore-gateway.db"
    journal_sync: str = "full"
    max_pending_spans: int = 100_000
    retry_after_s: float = 1.0
    judge_model: str | None = None
    scorers: Sequence[Any] | None = None
    max_wait_s: float = 30.0
    max_held_spans: int = 2048
    queue_size: int = 1000
    concurrency: int = 8
    scoring_shutdown_timeout_s: float = 10.0
    isolation: str = "auto"
    recognisers: Sequence[Any] | None = None
    trace: Mapping[str, Any] = field(default_factory=dict)  # the `trace:` section, checked
    telemetry_metrics: bool = False
    telemetry_logs: bool | None = None
    telemetry_endpoint: str | None = None
    telemetry_protocol: str | None = None
    telemetry_interval_s: float = 60.0
    shutdown_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        for name in ("grpc_endpoint", "http_endpoint", "health_endpoint"):
            value = getattr(self, name)
            if value is not None:
                host_port(value, _KEY_OF[name])
        for name in ("max_request_bytes", "max_decompressed_bytes", "forward_workers",
                     "max_batch_spans", "max_pending_spans", "max_connections"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"{_KEY_OF[name]} must be an integer >= 1, got {value!r}")
        for name in ("exporter_timeout_s", "retry_after_s", "shutdown_timeout_s",
                     "telemetry_interval_s", "read_timeout_s", "idle_timeout_s", "stuck_after_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigurationError(f"{_KEY_OF[name]} must be a number > 0, got {value!r}")
        if not isinstance(self.telemetry_metrics, bool):
            raise ConfigurationError(f"telemetry.metrics must be true or false, "
                                     f"got {self.telemetry_metrics!r}")
        if self.telemetry_logs is not None and not isinstance(self.telemetry_logs, bool):
            raise ConfigurationError(f"telemetry.logs must be true or false, "
                                     f"got {self.telemetry_logs!r}")
        if self.telemetry_protocol not in (None, *PROTOCOLS):
            raise ConfigurationError(f"telemetry.protocol must be one of {', '.join(PROTOCOLS)}, "
                                     f"got {self.telemetry_protocol!r}")
        if self.exporter_protocol not in PROTOCOLS:
            raise ConfigurationError(f"exporter.protocol must be one of {', '.join(PROTOCOLS)}, "
                                     f"got {self.exporter_protocol!r}")
        if self.exporter_compression not in COMPRESSIONS:
            raise ConfigurationError(f"exporter.compression must be one of "
                                     f"{', '.join(COMPRESSIONS)}, got {self.exporter_compression!r}")
        check_endpoint(self.exporter_endpoint, self.exporter_protocol, "exporter.endpoint")
        if self.telemetry_endpoint is not None:
            check_endpoint(self.telemetry_endpoint,
                           self.telemetry_protocol or self.exporter_protocol, "telemetry.endpoint")
        if self.journal_sync not in ("full", "normal"):
            raise ConfigurationError(f"journal.sync must be full or normal, got {self.journal_sync!r}")
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ConfigurationError("receivers.tls needs both cert_file and key_file")
        for name in ("tls_cert_file", "tls_key_file", "tls_client_ca_file", "exporter_ca_file"):
            value = getattr(self, name)
            if value is not None and not Path(value).is_file():
                raise ConfigurationError(f"{_KEY_OF[name]}: no such file {value!r}")
        if (isinstance(self.max_batch_bytes, bool) or not isinstance(self.max_batch_bytes, int)
                or self.max_batch_bytes < MIN_MAX_BATCH_BYTES):
            raise ConfigurationError(f"exporter.max_batch_bytes must be an integer >= "
                                     f"{MIN_MAX_BATCH_BYTES}, got {self.max_batch_bytes!r}")
        if self.max_decompressed_bytes < self.max_request_bytes:
            raise ConfigurationError("receivers.max_decompressed_bytes must be >= "
                                     "receivers.max_request_bytes")


# YAML key path -> (GatewayConfig field, parser)
def _text(path: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"{path} must be a non-empty string, got {value!r}")
    return value


def _optional_text(path: str, value: Any) -> str | None:
    return None if value is None or value is False else _text(path, value)


def _endpoint(path: str, value: Any) -> str | None:
    if value is None or value is False:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = f"0.0.0.0:{value}"
    host_port(_text(path, value), path)
    return str(value)


def _same(path: str, value: Any) -> Any:
    return value


def _headers(path: str, value: Any) -> dict[str, str]:
    if isinstance(value, str):
        return _parse_header_list(value, path)
    if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ConfigurationError(f"{path} must map header names to string values, got {value!r}")
    return dict(value)


def _list(path: str, value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ConfigurationError(f"{path} must be a list, got {value!r}")
    return value


_KEYS: dict[str, tuple[str, Callable[[str, Any], Any]]] = {
    "receivers.grpc": ("grpc_endpoint", _endpoint),
    "receivers.http": ("http_endpoint", _endpoint),
    "receivers.health": ("health_endpoint", _endpoint),
    "receivers.bearer_token": ("bearer_token", _optional_text),
    "receivers.tls.cert_file": ("tls_cert_file", _optional_text),
    "receivers.tls.key_file": ("tls_key_file", _optional_text),
    "receivers.tls.client_ca_file": ("tls_client_ca_file", _optional_text),
    "receivers.max_request_bytes": ("max_request_bytes", _same),
    "receivers.max_decompressed_bytes": ("max_decompressed_bytes", _same),
    "receivers.read_timeout_s": ("read_timeout_s", _same),
    "receivers.idle_timeout_s": ("idle_timeout_s", _same),
    "receivers.max_connections": ("max_connections", _same),
    "exporter.endpoint": ("exporter_endpoint", _text),
    "exporter.protocol": ("exporter_protocol", _same),
    "exporter.headers": ("exporter_headers", _headers),
    "exporter.compression": ("exporter_compression", _same),
    "exporter.timeout_s": ("exporter_timeout_s", _same),
    "exporter.ca_file": ("exporter_ca_file", _optional_text),
    "exporter.workers": ("forward_workers", _same),
    "exporter.max_batch_spans": ("max_batch_spans", _same),
    "exporter.max_batch_bytes": ("max_batch_bytes", _same),
    "exporter.stuck_after_s": ("stuck_after_s", _same),
    "journal.path": ("journal_path", _text),
    "journal.sync": ("journal_sync", _same),
    "limits.max_pending_spans": ("max_pending_spans", _same),
    "limits.retry_after_s": ("retry_after_s", _same),
    "scoring.judge_model": ("judge_model", _optional_text),
    "scoring.scorers": ("scorers", _list),
    "scoring.max_wait_s": ("max_wait_s", _same),
    "scoring.max_held_spans": ("max_held_spans", _same),
    "scoring.queue_size": ("queue_size", _same),
    "scoring.concurrency": ("concurrency", _same),
    "scoring.shutdown_timeout_s": ("scoring_shutdown_timeout_s", _same),
    "scoring.isolation": ("isolation", _same),
    "recognise.builtins": ("builtins", _same),
    "recognise.mappings": ("mappings", _list),
    "trace.max_tool_calls": ("trace_max_tool_calls", _same),
    "trace.max_chars": ("trace_max_chars", _same),
    "trace.max_spans": ("trace_max_spans", _same),
    "trace.max_traces": ("trace_max_traces", _same),
    "trace.max_bytes": ("trace_max_bytes", _same),
    "trace.max_age_s": ("trace_max_age_s", _same),
    "trace.llm_wait_s": ("trace_llm_wait_s", _same),
    "telemetry.metrics": ("telemetry_metrics", _same),
    "telemetry.logs": ("telemetry_logs", _same),
    "telemetry.endpoint": ("telemetry_endpoint", _optional_text),
    "telemetry.protocol": ("telemetry_protocol", _same),
    "telemetry.interval_s": ("telemetry_interval_s", _same),
    "shutdown_timeout_s": ("shutdown_timeout_s", _same),
}
_KEY_OF = {name: path for path, (name, _) in _KEYS.items()}
_PROCESSOR_KEYS = {"max_wait_s", "max_held_spans", "queue_size", "concurrency", "isolation",
                   "scoring_shutdown_timeout_s"}

# environment variable -> key path
_ENV: dict[str, str] = {
    _env.GATEWAY_TOKEN.name: "receivers.bearer_token",
    _env.JUDGE_MODEL.name: "scoring.judge_model",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "exporter.endpoint",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "exporter.protocol",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "exporter.headers",
    "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "exporter.compression",
    "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": "exporter.ca_file",
}
_ENV_FALLBACK = {  # generic variables, used when the traces-specific one is unset
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "OTEL_EXPORTER_OTLP_COMPRESSION",
    "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": "OTEL_EXPORTER_OTLP_CERTIFICATE",
}


def load_gateway_config(path: str | os.PathLike[str] | None = None,
                        overrides: Mapping[str, Any] | None = None,
                        environ: Mapping[str, str] | None = None) -> GatewayConfig:
    """Read `path` (YAML; default $TRACESCORE_GATEWAY_CONFIG, else none), then the environment,
    then `overrides` ({"receivers.grpc": "0.0.0.0:5317", ...}); build scorers and recognisers.

    Raises `ConfigurationError` naming the key of the first bad value.
    """
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    path = path or _env.GATEWAY_CONFIG.raw(env)
    if path is not None:
        values.update(_flatten(_read_yaml(Path(path)), ""))
    for var, key in _ENV.items():
        raw = env.get(var) or env.get(_ENV_FALLBACK.get(var, ""), "")
        if raw:
            values[key] = _from_env(var, key, raw)
    for key, value in (overrides or {}).items():
        if key not in _KEYS:
            raise ConfigurationError(f"{key}: unknown setting; known: {', '.join(_KEYS)}")
        values[key] = value
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        name, parse = _KEYS[key]
        kwargs[name] = parse(key, value)
    kwargs["trace"] = {name.removeprefix("trace_"): kwargs.pop(name)
                       for name in list(kwargs) if name.startswith("trace_")}
    from tracescore.gateway._trace_buffer import buffer_from

    buffer_from(kwargs["trace"])  # validated now
    builtins = kwargs.pop("builtins", True)
    mappings = kwargs.pop("mappings", [])
    kwargs["recognisers"] = _recognisers(mappings, builtins)
    judge_model = kwargs.get("judge_model")
    kwargs["scorers"] = build_online_scorers(kwargs.get("scorers"), judge_model,
                                             base=Path(path).parent if path else Path.cwd())
    config = GatewayConfig(**kwargs)
    processor_options(config)  # validated now, not when the gateway starts
    return config


def processor_options(config: GatewayConfig) -> dict[str, Any]:
    """`ScoringSpanProcessor` keyword arguments of a config (validated)."""
    from tracescore.online._options import ProcessorOptions

    options = {name: getattr(config, name) for name in _PROCESSOR_KEYS}
    options["shutdown_timeout_s"] = options.pop("scoring_shutdown_timeout_s")
    try:
        ProcessorOptions(**options)
    except ConfigurationError as exc:
        raise ConfigurationError(f"scoring: {exc}") from None
    return options


def with_overrides(config: GatewayConfig, **changes: Any) -> GatewayConfig:
    """A copy of `config` with fields changed (validated again)."""
    known = {f.name for f in fields(GatewayConfig)}
    unknown = sorted(set(changes) - known)
    if unknown:
        raise ConfigurationError(f"GatewayConfig has no field {unknown[0]!r}")
    return replace(config, **changes)


def host_port(value: str, key: str) -> tuple[str, int]:
    """("host", port) of "host:port" ("[::1]:4317" for IPv6); port 0 means any free port."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigurationError(f"{key} must be host:port (port 0-65535), got {value!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def build_online_scorers(specs: Sequence[Any] | None, judge_model: str | None, *,
                         base: Path) -> tuple[Any, ...]:
    """`OnlineScorer`s from `scoring.scorers` entries (dicts as in the YAML, or scorer objects)."""
    from tracescore.online._options import OnlineScorer, as_online_scorers
    from tracescore.scoring._registry import DEFAULT_SCORERS
    from tracescore.scoring._registry import judge_model as pick_model

    model = pick_model(judge_model)
    if not specs:
        specs = [{"scorer": name} for name in DEFAULT_SCORERS]
    built: list[Any] = []
    for index, spec in enumerate(specs):
        where = f"scoring.scorers[{index}]"
        if not isinstance(spec, Mapping):
            built.append(spec)
            continue
        unknown = sorted(str(k) for k in spec if k not in _SCORER_KEYS)
        if unknown:
            raise ConfigurationError(f"{where}.{unknown[0]}: unknown key; expected one of "
                                     f"{', '.join(_SCORER_KEYS)} (the scorer's own settings "
                                     f"go under options)")
        if "scorer" not in spec:
            raise ConfigurationError(f"{where}.scorer is required (relevancy, similarity, "
                                     f"another scorer name or module:attribute)")
        scorer = _scorer(_text(f"{where}.scorer", spec["scorer"]), spec.get("options") or {},
                         model, where)
        online = {k: v for k, v in spec.items() if k not in ("scorer", "options")}
        if "reference" in online:
            online["reference"] = _reference(online["reference"], base, f"{where}.reference")
        try:
            built.append(OnlineScorer(scorer, **online))
        except (ConfigurationError, TypeError) as exc:
            raise ConfigurationError(f"{where}: {exc}") from None
    try:
        return as_online_scorers(built)
    except ConfigurationError as exc:
        raise ConfigurationError(f"scoring.scorers: {exc}") from None


def _scorer(name: str, options: Any, model: str, where: str) -> Any:
    from tracescore._targets import SetupError, load_target
    from tracescore.scoring import Judge
    from tracescore.scoring._registry import create_scorer, scorer_id
    from tracescore.scoring._resolve import check_judge

    if not isinstance(options, Mapping):
        raise ConfigurationError(f"{where}.options must be a mapping, got {options!r}")
    try:  # module:attribute, else a scorer name
        target, sid = (load_target(name), "") if ":" in name else (None, scorer_id(name))
    except (SetupError, ConfigurationError) as exc:
        raise ConfigurationError(f"{where}.scorer: {exc}") from None
    try:
        if target is not None:
            return target(**options) if isinstance(target, type) or options else target
        scorer = create_scorer(sid, options, model=model)
        judge = getattr(scorer, "judge", None)
        if isinstance(judge, Judge):  # the gateway imports litellm anyway:
            check_judge(judge)  # check everything now
        return scorer
    except (ConfigurationError, TypeError) as exc:
        raise ConfigurationError(f"{where}.options: {exc}") from None


def _reference(value: Any, base: Path, where: str) -> dict[Any, Any]:
    """A reference dataset file (input -> ground_truth) as a mapping."""
    from tracescore._content import lookup_key
    from tracescore._datasets import DatasetError, load_dataset
    from tracescore.online._options import reference_key

    file = Path(_text(where, value))
    if not file.is_absolute():
        file = base / file
    try:
        items = load_dataset(file)
    except DatasetError as exc:
        raise ConfigurationError(f"{where}: {exc}") from None
    found: dict[Any, Any] = {}
    by_question: dict[str, Any] = {}  # any input shape matches any other on its question text
    for item in items:
        if item.get("ground_truth") is None:
            continue
        key = item["input"]
        found[key if isinstance(key, str) else lookup_key(key)] = item["ground_truth"]
        question = reference_key(key)
        if question is not None:
            by_question.setdefault(question, item["ground_truth"])
    return {**by_question, **found}


def _recognisers(mappings: Any, builtins: Any) -> tuple[Any, ...]:
    from tracescore.online._recognise import build_recognisers

    return tuple(build_recognisers(mappings, where="recognise.mappings", builtins=builtins,
                                   builtins_key="recognise.builtins"))


def _read_yaml(path: Path) -> Mapping[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"config file {str(path)!r}: cannot read: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigurationError(f"config file {str(path)!r}: not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigurationError(f"config file {str(path)!r}: the top level must be a mapping")
    return data


def _flatten(data: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if path in _KEYS:
            flat[path] = value
        elif isinstance(value, Mapping) and any(k.startswith(path + ".") for k in _KEYS):
            flat.update(_flatten(value, path + "."))
        else:
            raise ConfigurationError(f"{path}: unknown setting")
    return flat


def _from_env(var: str, key: str, raw: str) -> Any:
    if key == "exporter.protocol" and raw == "http/json":
        raise ConfigurationError(f"{var}: http/json is not supported by the gateway's exporter; "
                                 f"use grpc or http/protobuf")
    if key == "exporter.headers":
        return _parse_header_list(raw, var)
    return raw


def _parse_header_list(raw: str, key: str) -> dict[str, str]:
    """`k1=v1,k2=v2` (values URL-decoded), as in OTEL_EXPORTER_OTLP_HEADERS."""
    from urllib.parse import unquote

    headers: dict[str, str] = {}
    for part in raw.split(","):
        if not part.strip():
            continue
        name, sep, value = part.partition("=")
        if not sep or not name.strip():
            raise ConfigurationError(f"{key}: bad header {part!r}; write name=value")
        headers[name.strip().lower()] = unquote(value.strip())
    return headers
