"""The gateway's start line names a receiver that is turned off as `off` (it said `http=None`)."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from _gateway_helpers import SeenScorer

from tracescore import OnlineScorer
from tracescore.gateway._config import GatewayConfig
from tracescore.gateway._gateway import Gateway


@pytest.mark.parametrize(("grpc", "http", "health"), [
    (True, False, True), (False, True, True), (True, True, False), (False, True, False)])
def test_the_start_line_says_off(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                 grpc: bool, http: bool, health: bool) -> None:
    on = "127.0.0.1:0"
    config = GatewayConfig(
        grpc_endpoint=on if grpc else None, http_endpoint=on if http else None,
        health_endpoint=on if health else None, exporter_endpoint="127.0.0.1:9",
        journal_path=str(tmp_path / "j.db"), scorers=[OnlineScorer(SeenScorer())],
        isolation="thread", shutdown_timeout_s=1.0)
    with caplog.at_level(logging.INFO, logger="tracescore.gateway"):
        gateway = Gateway(config).start()
        gateway.stop(timeout_s=1)
    (line,) = [r.getMessage() for r in caplog.records if "gateway listening" in r.getMessage()]
    assert "None" not in line
    for name, wanted in (("grpc", grpc), ("http", http), ("health", health)):
        found = re.search(rf"\b{name}=(\S+)", line)
        assert found is not None, line
        value = found.group(1)
        assert (value == "off") != wanted and (value.isdigit() == wanted), line
