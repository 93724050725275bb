"""Fixtures only the end-to-end tests use (their conftest.py imports them)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _helpers import shut_down_pipelines
from rigs.phoenix import PhoenixServer


@pytest.fixture
def phoenix() -> Iterator[PhoenixServer]:
    """A real Phoenix on free ports (installed into the cache on first use: minutes), stopped
    after the test, with tracescore's global pipelines shut down."""
    with PhoenixServer(startup_timeout=300) as server:
        yield server
    shut_down_pipelines()
