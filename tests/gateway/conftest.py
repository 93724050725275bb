"""Fixtures shared by the gateway tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tracescore.gateway import Gateway, GatewayConfig


@pytest.fixture
def gateway_factory() -> Iterator[Callable[[GatewayConfig], Gateway]]:
    """Starts gateways from configs; stops every one it started when the test ends."""
    started: list[Gateway] = []

    def start(config: GatewayConfig) -> Gateway:
        gateway = Gateway(config).start()
        started.append(gateway)
        return gateway

    yield start
    for gateway in started:
        gateway.stop(timeout_s=5)
