"""Gateway configuration: a YAML file, then environment variables, then command-line overrides,
validated once at start; every error is a `ConfigurationError` naming the key (`serve` exits 2).

    receivers: {grpc: 0.0.0.0:4317, http: 0.0.0.0:4318, health: 0.0.0.0:13133,
                bearer_token: ..., tls: {cert_file, key_file, client_ca_file},
                max_request_bytes: ..., max_decompressed_bytes: ...,
                read_timeout_s: 30, idle_timeout_s: 60, max_connections: auto}
    exporter:  {endpoint, protocol: grpc | http/protobuf, headers, compression, timeout_s,
                ca_file, workers, max_batch_spans, max_batch_bytes, stuck_after_s}
    journal:   {path, sync: full | normal}
    limits:    {max_pending_spans, retry_after_s}
    scoring:   {judge_model, scorers: [...], max_wait_s, max_held_spans, queue_size,
                concurrency, shutdown_timeout_s, isolation}
    recognise: {builtins: true, mappings: [...]}
    trace:     {max_tool_calls, max_chars, max_spans, max_traces, max_bytes, max_age_s,
                llm_wait_s}
    runs:      {quiet_s: 5, max_runs, max_bytes, max_age_s}
    conversations: {quiet_s: 300, max_turns, max_conversations, max_bytes, max_age_s,
                id_attributes}
    telemetry: {metrics: false, logs: (auto), endpoint, protocol, interval_s}
    shutdown_timeout_s: 30
    rectifiers: PATH   (a rectifiers file: `tracescore report --rectifiers`; exported as gauges)

`GatewayConfig` holds one frozen section per YAML section (`ReceiversConfig`, `ExporterConfig`,
...; each checks its own values), and reads each setting by its flat name too. The keys, their
parsers and the environment are in `_config_keys`, building scorers and recognisers in
`_config_scorers`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar, overload

from tracescore import _env
from tracescore._endpoints import check_endpoint
from tracescore._exceptions import ConfigurationError
from tracescore.gateway._config_keys import (
    _ENV,
    _ENV_FALLBACK,
    _KEYS,
    _flatten,
    _from_env,
    _read_yaml,
    host_port,
)
from tracescore.gateway._config_scorers import _recognisers, build_online_scorers, rectifiers_from
from tracescore.gateway._run_scope import run_bounds
from tracescore.gateway._split import MIN_MAX_BATCH_BYTES

__all__ = ["COMPRESSIONS", "PROTOCOLS", "GatewayConfig", "load_gateway_config",
           "processor_options", "with_overrides"]

PROTOCOLS = ("grpc", "http/protobuf")
COMPRESSIONS = ("gzip", "none")
T = TypeVar("T")


def _positive_ints(section: Any, *names: str) -> None:
    for name in names:
        value = getattr(section, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(f"{section.KEY}.{name} must be an integer >= 1, got {value!r}")


def _positive_numbers(section: Any, *names: str) -> None:
    for name in names:
        value = getattr(section, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ConfigurationError(f"{section.KEY}.{name} must be a number > 0, got {value!r}")


def _files(section: Any, *names: str) -> None:
    for name in names:
        value = getattr(section, name)
        if value is not None and not Path(value).is_file():
            raise ConfigurationError(f"{section.KEY}.{name}: no such file {value!r}")


def _one_of(section: Any, name: str, allowed: Sequence[Any], shown: str) -> None:
    value = getattr(section, name)
    if value not in allowed:
        raise ConfigurationError(f"{section.KEY}.{name} must be {shown}, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class TlsConfig:
    """`receivers.tls`: the server certificate and key; with `client_ca_file`, clients must
    present a certificate it signed."""

    KEY: ClassVar[str] = "receivers.tls"
    cert_file: str | None = None
    key_file: str | None = None
    client_ca_file: str | None = None

    def __post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise ConfigurationError("receivers.tls needs both cert_file and key_file")
        _files(self, "cert_file", "key_file", "client_ca_file")


@dataclass(frozen=True, kw_only=True)
class ReceiversConfig:
    """`receivers`: listen addresses ("host:port"; port 0: any free port; None: off), the
    bearer token, TLS and the bounds of one connection and one request."""

    KEY: ClassVar[str] = "receivers"
    grpc: str | None = "0.0.0.0:4317"
    http: str | None = "0.0.0.0:4318"
    health: str | None = "0.0.0.0:13133"
    bearer_token: str | None = None
    tls: TlsConfig = field(default_factory=TlsConfig)
    max_request_bytes: int = 16 << 20
    max_decompressed_bytes: int = 64 << 20
    read_timeout_s: float = 30.0
    idle_timeout_s: float = 60.0
    max_connections: int | None = None  # 1000, lowered to fit the open files limit

    def __post_init__(self) -> None:
        for name in ("grpc", "http", "health"):
            value = getattr(self, name)
            if value is not None:
                host_port(value, f"receivers.{name}")
        _positive_ints(self, "max_request_bytes", "max_decompressed_bytes")
        if self.max_connections is not None:
            _positive_ints(self, "max_connections")
        _positive_numbers(self, "read_timeout_s", "idle_timeout_s")
        if self.max_decompressed_bytes < self.max_request_bytes:
            raise ConfigurationError("receivers.max_decompressed_bytes must be >= "
                                     "receivers.max_request_bytes")


@dataclass(frozen=True, kw_only=True)
class ExporterConfig:
    """`exporter`: the next hop and how spans are forwarded to it."""

    KEY: ClassVar[str] = "exporter"
    endpoint: str = "http://localhost:4317"
    protocol: str = "grpc"
    headers: Mapping[str, str] = field(default_factory=dict)
    compression: str = "none"
    timeout_s: float = 10.0
    ca_file: str | None = None
    workers: int = 2
    max_batch_spans: int = 8192
    max_batch_bytes: int = 3584 << 10  # 3.5 MiB, under the Collector's 4 MiB gRPC default
    stuck_after_s: float = 300.0

    def __post_init__(self) -> None:
        _positive_ints(self, "workers", "max_batch_spans")
        _positive_numbers(self, "timeout_s", "stuck_after_s")
        _one_of(self, "protocol", PROTOCOLS, f"one of {', '.join(PROTOCOLS)}")
        _one_of(self, "compression", COMPRESSIONS, f"one of {', '.join(COMPRESSIONS)}")
        check_endpoint(self.endpoint, self.protocol, "exporter.endpoint")
        _files(self, "ca_file")
        if (isinstance(self.max_batch_bytes, bool) or not isinstance(self.max_batch_bytes, int)
                or self.max_batch_bytes < MIN_MAX_BATCH_BYTES):
            raise ConfigurationError(f"exporter.max_batch_bytes must be an integer >= "
                                     f"{MIN_MAX_BATCH_BYTES}, got {self.max_batch_bytes!r}")


@dataclass(frozen=True, kw_only=True)
class JournalConfig:
    """`journal`: the SQLite file that holds what is not yet forwarded."""

    KEY: ClassVar[str] = "journal"
    path: str = "tracescore-gateway.db"
    sync: str = "full"

    def __post_init__(self) -> None:
        _one_of(self, "sync", ("full", "normal"), "full or normal")


@dataclass(frozen=True, kw_only=True)
class LimitsConfig:
    """`limits`: how much the gateway holds before it refuses, and the retry delay it sends."""

    KEY: ClassVar[str] = "limits"
    max_pending_spans: int = 100_000
    retry_after_s: float = 1.0

    def __post_init__(self) -> None:
        _positive_ints(self, "max_pending_spans")
        _positive_numbers(self, "retry_after_s")


@dataclass(frozen=True, kw_only=True)
class ScoringConfig:
    """`scoring`: the judge, the scorers (`Scorer`/`OnlineScorer` objects; None: relevancy and
    content similarity at rate 1) and the `ScoringSpanProcessor` options (checked by
    `processor_options`)."""

    KEY: ClassVar[str] = "scoring"
    judge_model: str | None = None
    scorers: Sequence[Any] | None = None
    max_wait_s: float = 30.0
    max_held_spans: int = 2048
    queue_size: int = 1000
    concurrency: int = 8
    shutdown_timeout_s: float = 10.0
    isolation: str = "auto"


@dataclass(frozen=True, kw_only=True)
class TelemetryConfig:
    """`telemetry`: the gateway's own metrics and logs over OTLP (endpoint and protocol: the
    exporter's when None)."""

    KEY: ClassVar[str] = "telemetry"
    metrics: bool = False
    logs: bool | None = None  # None: on when a scorer uses the `log` sink
    endpoint: str | None = None
    protocol: str | None = None
    interval_s: float = 60.0

    def __post_init__(self) -> None:
        for name in ("metrics", "logs"):
            value = getattr(self, name)
            if not isinstance(value, bool) and (name == "metrics" or value is not None):
                raise ConfigurationError(f"telemetry.{name} must be true or false, got {value!r}")
        _one_of(self, "protocol", (None, *PROTOCOLS), f"one of {', '.join(PROTOCOLS)}")
        _positive_numbers(self, "interval_s")


class _Alias(Generic[T]):
    """A flat read-only name for a section's setting (`config.grpc_endpoint` is
    `config.receivers.grpc`), as `GatewayConfig` had before it had sections."""

    def __init__(self, path: str) -> None:
        self.path = path

    @overload
    def __get__(self, config: None, owner: type) -> _Alias[T]: ...
    @overload
    def __get__(self, config: GatewayConfig, owner: type) -> T: ...
    def __get__(self, config: GatewayConfig | None, owner: type) -> T | _Alias[T]:
        if config is None:
            return self
        value: Any = config
        for part in self.path.split("."):
            value = getattr(value, part)
        return value


_SECTIONS: dict[str, type[Any]] = {
    "receivers": ReceiversConfig, "exporter": ExporterConfig, "journal": JournalConfig,
    "limits": LimitsConfig, "scoring": ScoringConfig, "telemetry": TelemetryConfig}


@dataclass(frozen=True, init=False)
class GatewayConfig:
    """Everything `Gateway` needs, validated, in the sections of the YAML file: `receivers`,
    `exporter`, `journal`, `limits`, `scoring`, `telemetry`, plus `recognisers` (the chain the
    `recognise` section builds; None: the built-in conventions), `trace` (the checked `trace`
    section), `runs` (the checked `runs` section: the run scope's quiet period and bounds),
    `conversations` (the checked `conversations` section: when conversation-scope scorers score),
    `shutdown_timeout_s` and `rectifiers` (`Rectifier` objects the quality gauges export).

    Give sections (`receivers=ReceiversConfig(grpc="127.0.0.1:0")`) or the flat names of single
    settings (`grpc_endpoint="127.0.0.1:0"`, `exporter_endpoint=...`, `scorers=[...]`, ...); the
    flat names also read each setting (`config.exporter_endpoint`).
    """

    receivers: ReceiversConfig
    exporter: ExporterConfig
    journal: JournalConfig
    limits: LimitsConfig
    scoring: ScoringConfig
    telemetry: TelemetryConfig
    recognisers: Sequence[Any] | None
    trace: Mapping[str, Any]
    shutdown_timeout_s: float
    conversations: Mapping[str, Any]
    runs: Mapping[str, Any]
    rectifiers: tuple[Any, ...]

    def __init__(self, *, receivers: ReceiversConfig | None = None,
                 exporter: ExporterConfig | None = None, journal: JournalConfig | None = None,
                 limits: LimitsConfig | None = None, scoring: ScoringConfig | None = None,
                 telemetry: TelemetryConfig | None = None,
                 recognisers: Sequence[Any] | None = None,
                 trace: Mapping[str, Any] | None = None, shutdown_timeout_s: float = 30.0,
                 runs: Mapping[str, Any] | None = None,
                 conversations: Mapping[str, Any] | None = None,
                 rectifiers: Sequence[Any] = (), **settings: Any) -> None:
        given = {"receivers": receivers, "exporter": exporter, "journal": journal,
                 "limits": limits, "scoring": scoring, "telemetry": telemetry}
        changes: dict[str, dict[str, Any]] = {name: {} for name in _SECTIONS}
        tls: dict[str, Any] = {}
        for name, value in settings.items():
            path = _FLAT.get(name)
            if path is None:
                raise TypeError(f"GatewayConfig() got an unexpected keyword argument {name!r}")
            section, _, key = path.partition(".")
            if key.startswith("tls."):
                tls[key.removeprefix("tls.")] = value
            else:
                changes[section][key] = value
        if tls:
            base = (receivers or ReceiversConfig()).tls
            changes["receivers"]["tls"] = replace(base, **tls)
        for name, cls in _SECTIONS.items():
            current = given[name] or cls()
            object.__setattr__(self, name, replace(current, **changes[name]) if changes[name]
                               else current)
        object.__setattr__(self, "recognisers", recognisers)
        object.__setattr__(self, "trace", {} if trace is None else trace)
        object.__setattr__(self, "runs", run_bounds(runs))
        object.__setattr__(self, "shutdown_timeout_s", shutdown_timeout_s)
        object.__setattr__(self, "conversations", {} if conversations is None else conversations)
        object.__setattr__(self, "rectifiers", tuple(rectifiers))
        self._check()

    def _check(self) -> None:
        value = self.shutdown_timeout_s
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ConfigurationError(f"shutdown_timeout_s must be a number > 0, got {value!r}")
        if self.telemetry.endpoint is not None:
            check_endpoint(self.telemetry.endpoint,
                           self.telemetry.protocol or self.exporter.protocol, "telemetry.endpoint")

    # the flat names of GatewayConfig before it had sections, read-only
    grpc_endpoint = _Alias[str | None]("receivers.grpc")
    http_endpoint = _Alias[str | None]("receivers.http")
    health_endpoint = _Alias[str | None]("receivers.health")
    bearer_token = _Alias[str | None]("receivers.bearer_token")
    tls_cert_file = _Alias[str | None]("receivers.tls.cert_file")
    tls_key_file = _Alias[str | None]("receivers.tls.key_file")
    tls_client_ca_file = _Alias[str | None]("receivers.tls.client_ca_file")
    max_request_bytes = _Alias[int]("receivers.max_request_bytes")
    max_decompressed_bytes = _Alias[int]("receivers.max_decompressed_bytes")
    read_timeout_s = _Alias[float]("receivers.read_timeout_s")
    idle_timeout_s = _Alias[float]("receivers.idle_timeout_s")
    max_connections = _Alias[int | None]("receivers.max_connections")
    exporter_endpoint = _Alias[str]("exporter.endpoint")
    exporter_protocol = _Alias[str]("exporter.protocol")
    exporter_headers = _Alias[Mapping[str, str]]("exporter.headers")
    exporter_compression = _Alias[str]("exporter.compression")
    exporter_timeout_s = _Alias[float]("exporter.timeout_s")
    exporter_ca_file = _Alias[str | None]("exporter.ca_file")
    forward_workers = _Alias[int]("exporter.workers")
    max_batch_spans = _Alias[int]("exporter.max_batch_spans")
    max_batch_bytes = _Alias[int]("exporter.max_batch_bytes")
    stuck_after_s = _Alias[float]("exporter.stuck_after_s")
    journal_path = _Alias[str]("journal.path")
    journal_sync = _Alias[str]("journal.sync")
    max_pending_spans = _Alias[int]("limits.max_pending_spans")
    retry_after_s = _Alias[float]("limits.retry_after_s")
    judge_model = _Alias[str | None]("scoring.judge_model")
    scorers = _Alias[Sequence[Any] | None]("scoring.scorers")
    max_wait_s = _Alias[float]("scoring.max_wait_s")
    max_held_spans = _Alias[int]("scoring.max_held_spans")
    queue_size = _Alias[int]("scoring.queue_size")
    concurrency = _Alias[int]("scoring.concurrency")
    scoring_shutdown_timeout_s = _Alias[float]("scoring.shutdown_timeout_s")
    isolation = _Alias[str]("scoring.isolation")
    telemetry_metrics = _Alias[bool]("telemetry.metrics")
    telemetry_logs = _Alias[bool | None]("telemetry.logs")
    telemetry_endpoint = _Alias[str | None]("telemetry.endpoint")
    telemetry_protocol = _Alias[str | None]("telemetry.protocol")
    telemetry_interval_s = _Alias[float]("telemetry.interval_s")


# flat name -> section.key
_FLAT = {name: alias.path for name, alias in vars(GatewayConfig).items()
         if isinstance(alias, _Alias)}

_PROCESSOR_KEYS = ("max_wait_s", "max_held_spans", "queue_size", "concurrency", "isolation",
                   "shutdown_timeout_s")  # the `scoring` settings that go to the processor

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
    nested: dict[str, Any] = {}
    for key, value in values.items():
        *parents, leaf = key.split(".")
        into = nested
        for parent in parents:
            into = into.setdefault(parent, {})
        into[leaf] = _KEYS[key](key, value)
    trace = nested.pop("trace", {})
    from tracescore.online.intake import collector_from

    collector_from(trace)  # validated now
    conversations = nested.pop("conversations", {})
    from tracescore.online.core import as_conversation_options

    as_conversation_options(conversations)  # validated now
    nested["conversations"] = conversations
    runs = nested.pop("runs", {})
    base = Path(path).parent if path else Path.cwd()
    if nested.get("rectifiers") is not None:
        nested["rectifiers"] = rectifiers_from(nested["rectifiers"], base)
    recognise = nested.pop("recognise", {})
    recognisers = _recognisers(recognise.get("mappings", []), recognise.get("builtins", True))
    scoring = nested.setdefault("scoring", {})
    scoring["scorers"] = build_online_scorers(scoring.get("scorers"), scoring.get("judge_model"),
                                              base=base)
    if "tls" in nested.get("receivers", {}):
        nested["receivers"]["tls"] = TlsConfig(**nested["receivers"]["tls"])
    sections = {name: _SECTIONS[name](**nested.pop(name)) for name in list(nested)
                if name in _SECTIONS}
    config = GatewayConfig(**sections, recognisers=recognisers, trace=trace, runs=runs,
                           **nested)
    processor_options(config)  # validated now, not when the gateway starts
    return config


def processor_options(config: GatewayConfig) -> dict[str, Any]:
    """`ScoringSpanProcessor` keyword arguments of a config (validated)."""
    from tracescore.online.core import ProcessorOptions

    options = {name: getattr(config.scoring, name) for name in _PROCESSOR_KEYS}
    try:
        ProcessorOptions(**options)
    except ConfigurationError as exc:
        raise ConfigurationError(f"scoring: {exc}") from None
    return options


def with_overrides(config: GatewayConfig, **changes: Any) -> GatewayConfig:
    """A copy of `config` with sections or single settings (by their flat names) changed,
    validated again."""
    sections = {f.name: getattr(config, f.name) for f in fields(GatewayConfig)}
    unknown = sorted(set(changes) - set(sections) - set(_FLAT))
    if unknown:
        raise ConfigurationError(f"GatewayConfig has no field {unknown[0]!r}")
    return GatewayConfig(**{**sections, **changes})
