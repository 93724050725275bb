"""Export configuration mistakes fail at configure() time with a ConfigurationError naming the setting."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from _helpers import shut_down_pipelines
from hypothesis import given, settings
from hypothesis import strategies as st

import tracescore
from tracescore import (
    ConfigurationError,
    ContentSimilarityScorer,
    OnlineScorer,
    ScoringSpanProcessor,
)
from tracescore.testing import OTLPReceiver

_NOT_FINITE = [math.inf, -math.inf, math.nan]
_LABELS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=12)


@pytest.fixture(autouse=True)
def _clean_pipelines() -> Iterator[None]:
    shut_down_pipelines()
    yield
    shut_down_pipelines()


@pytest.mark.parametrize("empty", [[], (), ["otlp"][:0]])
def test_an_empty_exporter_list_is_refused(empty: list[str]) -> None:
    with pytest.raises(ConfigurationError, match=r"exporter=\[\]"):
        tracescore.configure(exporter=empty)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_characters="=,%", blacklist_categories=["Cs"]),
                        min_size=1).filter(str.strip), min_size=1, max_size=3),
       st.booleans())
def test_a_header_string_with_an_entry_that_is_not_name_value_is_refused(
        garbage: list[str], with_good_entry: bool) -> None:
    text = ",".join((["x-tenant=acme"] if with_good_entry else []) + garbage)
    with pytest.raises(ConfigurationError, match="headers"):
        tracescore.configure(exporter="otlp-http", endpoint="http://127.0.0.1:4318", headers=text)


def test_a_well_formed_header_string_reaches_the_receiver(otlp_receiver: OTLPReceiver) -> None:
    handle = tracescore.configure(exporter="otlp-http", endpoint=otlp_receiver.http_endpoint,
                                  headers="X-Tenant=acme%20corp, x-other = 1 ,")
    with handle.tracer_provider.get_tracer("t").start_as_current_span("one"):
        pass
    assert handle.flush(10)
    otlp_receiver.wait_for_spans(1)
    (request,) = otlp_receiver.requests
    assert request.headers["x-tenant"] == "acme corp" and request.headers["x-other"] == "1"


@settings(max_examples=40, deadline=None)
@given(st.lists(_LABELS, min_size=1, max_size=3), st.data(),
       st.sampled_from([" ", "\t", "\n", "\u00a0"]), st.sampled_from(["otlp-http", "otlp-grpc"]),
       st.booleans())
def test_an_endpoint_with_whitespace_in_the_host_is_refused(
        labels: list[str], data: st.DataObject, space: str, exporter: str, scheme: bool) -> None:
    host = ".".join(labels)
    cut = data.draw(st.integers(0, len(host)))
    bad = host[:cut] + space + host[cut:]
    endpoint = f"http://{bad}:4318" if scheme or exporter == "otlp-http" else f"{bad}:4317"
    with pytest.raises(ConfigurationError, match="endpoint"):
        tracescore.configure(exporter=exporter, endpoint=endpoint)


@pytest.mark.parametrize("endpoint", ["http://localhost:4318", "http://127.0.0.1:4318/v1/traces",
                                      "https://otel.example.com", "http://[::1]:4318"])
def test_valid_endpoints_are_still_accepted(endpoint: str) -> None:
    tracescore.configure(exporter="otlp-http", endpoint=endpoint)


@pytest.mark.parametrize("option", ["rate", "rate_limit_per_minute", "budget_usd_per_hour", "timeout_s"])
@pytest.mark.parametrize("value", _NOT_FINITE)
def test_online_scorer_numbers_must_be_finite(option: str, value: float) -> None:
    with pytest.raises(ConfigurationError, match=option):
        OnlineScorer(ContentSimilarityScorer(), **{option: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("value", _NOT_FINITE)
def test_configure_refuses_an_infinite_rate_limit(value: float) -> None:
    scorer = OnlineScorer(ContentSimilarityScorer(), rate=1.0, rate_limit_per_minute=10)
    assert scorer.rate_limit_per_minute == 10
    with pytest.raises(ConfigurationError, match="rate_limit_per_minute"):
        tracescore.configure(exporter="none", scorers=[
            OnlineScorer(ContentSimilarityScorer(), rate_limit_per_minute=value)])


@pytest.mark.parametrize("option", ["max_wait_s", "shutdown_timeout_s"])
@pytest.mark.parametrize("value", _NOT_FINITE)
def test_processor_timeouts_must_be_finite(option: str, value: float) -> None:
    from opentelemetry.sdk.trace import SpanProcessor

    with pytest.raises(ConfigurationError, match=option):
        ScoringSpanProcessor(SpanProcessor(), [ContentSimilarityScorer()], **{option: value})  # type: ignore[arg-type]
