"""`GatewayConfig` mirrors the YAML file: one section per section, each checking its own values
with messages that name the key, and the flat names of before still read every setting."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

import tracescore
from tracescore import ConfigurationError
from tracescore.gateway import (
    ExporterConfig,
    GatewayConfig,
    ReceiversConfig,
    ScoringConfig,
    TlsConfig,
    load_gateway_config,
)
from tracescore.gateway._config import _FLAT, _KEYS, with_overrides

YAML = """
receivers: {grpc: 127.0.0.1:5317, http: null, max_connections: 12}
exporter: {endpoint: 'http://next:4318', protocol: http/protobuf, headers: {x-team: a}, workers: 3}
journal: {path: j.db, sync: normal}
limits: {retry_after_s: 2.5}
scoring: {max_wait_s: 7, isolation: thread, scorers: [{scorer: similarity, rate: 0.5}]}
telemetry: {metrics: true, interval_s: 5}
shutdown_timeout_s: 12
"""


def test_each_yaml_section_is_a_section_of_the_config(tmp_path: Path) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text(YAML)
    config = load_gateway_config(path, environ={})
    assert config.receivers.grpc == "127.0.0.1:5317" and config.receivers.http is None
    assert config.receivers.max_connections == 12
    assert config.exporter == ExporterConfig(endpoint="http://next:4318", protocol="http/protobuf",
                                             headers={"x-team": "a"}, workers=3)
    assert (config.journal.path, config.journal.sync) == ("j.db", "normal")
    assert config.limits.retry_after_s == 2.5
    assert config.scoring.max_wait_s == 7 and config.scoring.isolation == "thread"
    (online,) = config.scoring.scorers or ()
    assert online.rate == 0.5
    assert config.telemetry.metrics is True and config.telemetry.interval_s == 5
    assert config.shutdown_timeout_s == 12


def test_every_flat_name_reads_its_section_setting_and_names_a_yaml_key(tmp_path: Path) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text(YAML)
    config = load_gateway_config(path, environ={})
    assert len(_FLAT) >= 39
    for name, key in _FLAT.items():
        assert key in _KEYS, name
        section, _, rest = key.partition(".")
        value = getattr(config, section)
        for part in rest.split("."):
            value = getattr(value, part)
        assert getattr(config, name) is value, name
    assert config.exporter_endpoint == "http://next:4318" and config.forward_workers == 3
    assert config.scoring_shutdown_timeout_s == 10.0 and config.shutdown_timeout_s == 12


def test_flat_names_are_read_only() -> None:
    config = GatewayConfig()
    with pytest.raises(AttributeError):
        config.grpc_endpoint = "127.0.0.1:1"
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.receivers.grpc = "127.0.0.1:1"  # type: ignore[misc]


def test_sections_and_flat_names_build_the_same_config(tmp_path: Path) -> None:
    cert = tmp_path / "cert.pem"
    cert.write_text("x")
    flat = GatewayConfig(grpc_endpoint="127.0.0.1:0", http_endpoint=None,
                         tls_cert_file=str(cert), tls_key_file=str(cert),
                         exporter_endpoint="http://next:4317", max_wait_s=3.0)
    nested = GatewayConfig(
        receivers=ReceiversConfig(grpc="127.0.0.1:0", http=None,
                                  tls=TlsConfig(cert_file=str(cert), key_file=str(cert))),
        exporter=ExporterConfig(endpoint="http://next:4317"), scoring=ScoringConfig(max_wait_s=3.0))
    assert flat == nested
    # a flat name given with its section changes that one setting of the section
    mixed = GatewayConfig(receivers=ReceiversConfig(grpc="127.0.0.1:0"), http_endpoint=None)
    assert mixed.receivers.grpc == "127.0.0.1:0" and mixed.http_endpoint is None


def test_copies_change_sections_or_single_settings_and_are_checked_again() -> None:
    config = GatewayConfig(grpc_endpoint="127.0.0.1:0")
    changed = with_overrides(config, max_wait_s=600.0, exporter=ExporterConfig(workers=4))
    assert changed.scoring.max_wait_s == 600.0 and changed.forward_workers == 4
    assert changed.receivers == config.receivers
    with pytest.raises(ConfigurationError, match="no field 'colour'"):
        with_overrides(config, colour="red")
    with pytest.raises(ConfigurationError, match="receivers.grpc"):
        with_overrides(config, grpc_endpoint="nope")
    with pytest.raises(TypeError, match="colour"):
        GatewayConfig(colour="red")


@pytest.mark.parametrize(("build", "key"), [
    (lambda: ReceiversConfig(health="nope"), "receivers.health"),
    (lambda: ReceiversConfig(max_request_bytes=0), "receivers.max_request_bytes"),
    (lambda: TlsConfig(cert_file="cert.pem"), "receivers.tls"),
    (lambda: ExporterConfig(compression="zip"), "exporter.compression"),
    (lambda: ExporterConfig(max_batch_bytes=10), "exporter.max_batch_bytes"),
    (lambda: GatewayConfig(telemetry_logs="yes"), "telemetry.logs"),
    (lambda: GatewayConfig(shutdown_timeout_s=0), "shutdown_timeout_s"),
    (lambda: GatewayConfig(telemetry_endpoint="htp://x"), "telemetry.endpoint"),
])
def test_a_bad_section_value_names_its_yaml_key(build: Callable[[], object], key: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        build()
    assert key in str(error.value)


def test_the_config_is_reachable_from_the_package() -> None:
    assert tracescore.GatewayConfig is GatewayConfig
