"""Exporter endpoints are checked once, by the same rules, wherever one is given: configure(endpoint=),
the OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT variables, the gateway's exporter.endpoint and
telemetry.endpoint, `tracescore serve --endpoint` and `tracescore rescore --endpoint` (exit 2 with
one line naming the setting). The rules are the OTel SDK's: OTLP/HTTP takes http(s) URLs, OTLP/gRPC
http(s) URLs or a bare host:port; anything else is refused, never sent somewhere as a guess."""

from __future__ import annotations

import os
import string
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracescore
from tracescore._endpoints import check_endpoint, grpc_address, grpc_target
from tracescore._exceptions import ConfigurationError
from tracescore.cli import main
from tracescore.gateway import load_gateway_config

PROTOCOLS = ("grpc", "http/protobuf")
HOSTS = ("collector", "127.0.0.1", "otel.example.com", "[::1]")

_schemes = st.text(string.ascii_lowercase + string.digits + "+-.", min_size=1, max_size=6).filter(
    lambda s: s not in ("http", "https"))
_ports = st.one_of(st.integers(65536, 10**7).map(str), st.integers(-9999, 0).map(str),
                   st.text(string.ascii_letters + "-_", min_size=1, max_size=5),
                   st.just(""))
_spaces = st.sampled_from([" ", "\t", "\n", "\u00a0"])


@st.composite
def typos(draw: st.DrawFn) -> str:
    """An endpoint a person could mistype: wrong scheme, no host, bad port, white space, a
    mangled "://"."""
    host = draw(st.sampled_from(HOSTS))
    scheme = draw(st.sampled_from(["http", "https"]))
    port = draw(st.integers(1, 65535))
    kind = draw(st.sampled_from(["scheme", "host", "port", "space", "separator"]))
    if kind == "scheme":
        return f"{draw(_schemes)}://{host}:{port}"
    if kind == "host":
        return draw(st.sampled_from([f"{scheme}://:{port}", f"{scheme}://", f"{scheme}:///v1/traces",
                                     f"{scheme}://@:{port}"]))
    if kind == "port":
        return f"{scheme}://{host}:{draw(_ports)}"
    if kind == "space":
        good = f"{scheme}://{host}:{port}"
        at = draw(st.integers(0, len(good)))
        return good[:at] + draw(_spaces) + good[at:]
    broken = draw(st.sampled_from([f"{scheme}//", f"{scheme}:/", f"{scheme}:://", f"{scheme}:\\\\"]))
    return f"{broken}{host}:{port}"


def _one_line_naming(error: ConfigurationError, key: str) -> None:
    text = str(error)
    assert text.startswith(key) and "\n" not in text.strip("\n"), text


@settings(max_examples=300, deadline=None)
@given(endpoint=typos(), protocol=st.sampled_from(PROTOCOLS))
def test_mistyped_endpoints_are_refused_naming_the_setting(endpoint: str, protocol: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        check_endpoint(endpoint, protocol, "exporter.endpoint")
    _one_line_naming(error.value, "exporter.endpoint")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(endpoint=typos(), protocol=st.sampled_from(PROTOCOLS))
def test_every_place_an_endpoint_is_given_refuses_them(endpoint: str, protocol: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = "otlp-grpc" if protocol == "grpc" else "otlp-http"
    with pytest.raises(ConfigurationError):
        tracescore.configure(exporter=exporter, endpoint=endpoint)
    for var in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        with monkeypatch.context() as env:
            env.setenv(var, endpoint)
            with pytest.raises(ConfigurationError) as error:
                tracescore.configure(exporter=exporter)
            _one_line_naming(error.value, var)
    for key in ("exporter.endpoint", "telemetry.endpoint"):
        with pytest.raises(ConfigurationError) as error:
            load_gateway_config(None, {key: endpoint, "exporter.protocol": protocol}, environ={})
        _one_line_naming(error.value, key)
    result = CliRunner().invoke(main, ["rescore", os.devnull, "--endpoint", endpoint,
                                       "--protocol", protocol])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("Error: --endpoint"), result.output


@pytest.mark.parametrize("endpoint", ["htp://127.0.0.1:4317", "http://127.0.0.1:70000",
                                      "http://127.0.0.1 :4317", "grpc://127.0.0.1:4317"])
def test_serve_exits_2_with_one_line(endpoint: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tracescore", "serve", "--endpoint", endpoint,
         "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0", "--health", "127.0.0.1:0"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("Error: exporter.endpoint") and repr(endpoint) in line


@pytest.mark.parametrize(("endpoint", "address", "insecure"), [
    ("http://collector:4317", "collector:4317", True),
    ("https://collector", "collector:443", False),
    ("HTTP://127.0.0.1:4317/", "127.0.0.1:4317", True),
    ("localhost:4317", "localhost:4317", True),     # bare loopback: plaintext
    ("collector:4317", "collector:4317", False),    # bare elsewhere: TLS, as the SDK does
    ("[::1]:4317", "[::1]:4317", True),
    ("http://[2001:db8::1]:4317", "[2001:db8::1]:4317", True),
])
def test_grpc_endpoints_the_sdk_takes_are_taken(endpoint: str, address: str, insecure: bool) -> None:
    url, plain = grpc_target(endpoint, "exporter.endpoint")
    assert (grpc_address(url), plain) == (address, insecure)
    config = load_gateway_config(None, {"exporter.endpoint": endpoint}, environ={})
    assert config.exporter_endpoint == endpoint


def test_grpc_takes_no_path() -> None:
    with pytest.raises(ConfigurationError, match="gRPC takes no path"):
        load_gateway_config(None, {"exporter.endpoint": "http://collector:4317/v1/traces"},
                            environ={})


@pytest.mark.parametrize("endpoint", ["http://collector:4318", "https://collector/api/v1/traces",
                                      "http://[::1]:4318/"])
def test_http_endpoints_are_taken(endpoint: str) -> None:
    config = load_gateway_config(None, {"exporter.endpoint": endpoint,
                                        "exporter.protocol": "http/protobuf"}, environ={})
    assert config.exporter_endpoint == endpoint
    tracescore.configure(exporter="otlp-http", endpoint=endpoint).shutdown()
