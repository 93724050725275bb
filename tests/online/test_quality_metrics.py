"""Quality metrics in process (through the user's MeterProvider) and in the gateway's /metrics:
pass/fail by scorer, agent, version and label, the sampling weight carried, judge usage and
errors, unscored calls by reason; the gateway's text is valid Prometheus exposition."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracescore import _semconv as sc
from tracescore.gateway._quality_text import prometheus_text, quality_provider
from tracescore.instrument._calls import AgentCall, notify_agent_call
from tracescore.online import OnlineScorer, ScoringSpanProcessor
from tracescore.online import _quality as q
from tracescore.online._sampling import is_sampled
from tracescore.scoring._base import JudgeUsage, Scorer, ScoreResult

LABELS = {"relevant": 1.0, "partially_relevant": 0.5, "irrelevant": 0.0}


class Graded(Scorer):
    """A user's scorer: the label and score are the output's first word; judge usage attached."""

    uses_judge = True

    def __init__(self, id: str = "graded", fail: BaseException | None = None) -> None:
        self.id, self.name, self.fail = id, id.title(), fail

    async def arun(self, *, input: Any, output: Any, ground_truth: Any = None,
                   run_id: str | None = None) -> ScoreResult:
        if self.fail is not None:
            raise self.fail
        label = str(output).split()[0]
        return ScoreResult(run_id=run_id or "r", scorer_id=self.id, scorer_name=self.name,
                           score=LABELS[label], label=label, reason="graded",
                           usage=JudgeUsage(model="openai/judge-stub", calls=2, input_tokens=40,
                                            output_tokens=10, cost_usd=0.001, latency_ms=250.0))


def points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


@pytest.fixture
def pipeline() -> Iterator[Any]:
    made: list[TracerProvider] = []

    def build(scorers: list[Any]) -> tuple[TracerProvider, InMemoryMetricReader]:
        reader = InMemoryMetricReader()
        provider = TracerProvider()
        provider.add_span_processor(ScoringSpanProcessor(
            SimpleSpanProcessor(InMemorySpanExporter()), scorers, isolation="thread",
            meter_provider=MeterProvider(metric_readers=[reader])))
        made.append(provider)
        return provider, reader

    yield build
    for provider in made:
        provider.shutdown()


def call(provider: TracerProvider, output: str, agent: str = "support") -> int:
    tracer = provider.get_tracer("test")
    attrs = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: agent}
    with tracer.start_as_current_span(f"invoke_agent {agent}", attributes=attrs) as span:
        notify_agent_call(AgentCall(span=span, name=agent, input="q?", output=output, error=None,
                                    ground_truth=None, attributes=attrs))
    return span.get_span_context().trace_id


def test_results_by_outcome_and_label_carry_the_sampling_weight(pipeline) -> None:
    rate = 0.5
    provider, reader = pipeline([OnlineScorer(Graded(), rate=rate)])
    outputs = ["relevant yes", "partially_relevant so so", "irrelevant no"] * 20
    traces = [call(provider, output) for output in outputs]
    assert provider.force_flush(30_000)
    expected: Counter[tuple[str, str]] = Counter()
    for trace_id, output in zip(traces, outputs):
        if is_sampled(trace_id, rate):
            label = output.split()[0]
            expected[(label, "pass" if label == "relevant" else "fail")] += 1
    assert 0 < sum(expected.values()) < len(outputs)  # some sampled, some not

    found = points(reader)
    results = {(p.attributes[sc.GEN_AI_EVALUATION_SCORE_LABEL], p.attributes[q.OUTCOME]): p.value
               for p in found[q.RESULTS]}
    assert results == dict(expected)
    for p in found[q.RESULTS]:
        assert p.attributes[sc.GEN_AI_EVALUATION_NAME] == "Graded"
        assert p.attributes[sc.GEN_AI_AGENT_NAME] == "support"
        assert sc.TS_SCORER_VERSION in p.attributes
    weighted = {(p.attributes[sc.GEN_AI_EVALUATION_SCORE_LABEL], p.attributes[q.OUTCOME]): p.value
                for p in found[q.RESULTS_WEIGHTED]}
    assert weighted == pytest.approx({k: v / rate for k, v in expected.items()})
    n = sum(expected.values())
    (score,) = found[q.SCORE]
    assert score.count == n and list(score.explicit_bounds) == list(q.SCORE_BUCKETS)
    (calls,) = found[q.JUDGE_CALLS]
    assert calls.value == 2 * n and calls.attributes[sc.GEN_AI_REQUEST_MODEL] == "openai/judge-stub"
    tokens = {p.attributes[q.TOKEN_TYPE]: p.value for p in found[q.JUDGE_TOKENS]}
    assert tokens == {"input": 40 * n, "output": 10 * n}
    assert found[q.JUDGE_COST][0].value == pytest.approx(0.001 * n)
    (duration,) = found[q.JUDGE_DURATION]
    assert duration.count == n and duration.sum == pytest.approx(0.25 * n)


def test_failed_runs_count_as_judge_errors_and_unscored_by_reason(pipeline) -> None:
    provider, reader = pipeline([
        OnlineScorer(Graded("broken", fail=TimeoutError("judge slow"))),
        OnlineScorer(Graded("capped"), rate_limit_per_minute=1),
    ])
    for _ in range(4):
        call(provider, "relevant ok")
    assert provider.force_flush(30_000)
    found = points(reader)
    errors = {(p.attributes[sc.GEN_AI_EVALUATION_NAME], p.attributes[sc.ERROR_TYPE]): p.value
              for p in found[q.JUDGE_ERRORS]}
    assert errors == {("Broken", "TimeoutError"): 4}
    results = {p.attributes[sc.GEN_AI_EVALUATION_NAME]: p.value for p in found[q.RESULTS]}
    assert results == {"Capped": 1}  # the failed runs are no results
    unscored = {(p.attributes[sc.GEN_AI_EVALUATION_NAME], p.attributes[sc.TS_UNSCORED_REASON]):
                p.value for p in found[q.UNSCORED]}
    assert unscored == {("Capped", "rate_limited"): 3}


result_attrs = st.fixed_dictionaries(
    {sc.GEN_AI_EVALUATION_NAME: st.sampled_from(["Toxicity", "Answer Relevancy", "Mine"]),
     sc.GEN_AI_EVALUATION_SCORE_VALUE: st.floats(0, 1)},
    optional={sc.GEN_AI_EVALUATION_SCORE_LABEL: st.sampled_from(
                  ["non_toxic", "toxic", "relevant", "partially_relevant", "pass", "fail", "odd"]),
              sc.TS_SAMPLING_RATE: st.floats(0, 1),
              sc.TS_JUDGE_MODEL: st.sampled_from(["a/m1", "b/m2"]),
              sc.TS_JUDGE_COST_USD: st.floats(0, 1)})


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(result_attrs, st.sampled_from([None, "ops", "support"])),
                max_size=30))
def test_counts_and_weights_of_any_results(runs: list[tuple[dict[str, Any], str | None]]) -> None:
    provider, reader = quality_provider()
    metrics = q.QualityMetrics([provider.get_meter("test")])
    passes = 0
    weight = 0.0
    for attrs, agent in runs:
        metrics.result(attrs, agent, None)
        label = attrs.get(sc.GEN_AI_EVALUATION_SCORE_LABEL)
        passed = (label in q.PASSING_LABELS if label is not None
                  else attrs[sc.GEN_AI_EVALUATION_SCORE_VALUE] >= 0.5)
        passes += passed
        rate = attrs.get(sc.TS_SAMPLING_RATE)
        weight += 1 / max(rate, q.MIN_RATE) if rate else 1.0
    found = points(reader)
    results = found.get(q.RESULTS, [])
    assert sum(p.value for p in results) == len(runs)
    assert sum(p.value for p in results if p.attributes[q.OUTCOME] == "pass") == passes
    assert sum(p.value for p in found.get(q.RESULTS_WEIGHTED, [])) == pytest.approx(weight)
    assert sum(p.count for p in found.get(q.SCORE, [])) == len(runs)
    text = prometheus_text(reader)
    assert text.count("tracescore_evaluation_results_total{") == len(results)
    provider.shutdown()


def test_gateway_text_is_valid_prometheus_exposition() -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing: run `make prometheus`"
    provider, reader = quality_provider()
    metrics = q.QualityMetrics([provider.get_meter("test")])
    metrics.result({sc.GEN_AI_EVALUATION_NAME: 'Say "hi"\\now', sc.GEN_AI_EVALUATION_SCORE_VALUE: 0.7,
                    sc.GEN_AI_EVALUATION_SCORE_LABEL: "relevant", sc.TS_JUDGE_MODEL: "m",
                    sc.TS_JUDGE_CALLS: 1, sc.TS_JUDGE_LATENCY_MS: 20.0,
                    sc.TS_JUDGE_INPUT_TOKENS: 3, sc.TS_JUDGE_COST_USD: 0.5}, "a", None)
    metrics.result({sc.GEN_AI_EVALUATION_NAME: "x"}, None, "Timeout")
    metrics.unscored("x", None, "queue_full", 2)
    text = prometheus_text(reader)
    for family in ("tracescore_evaluation_results_total", "tracescore_evaluation_score_bucket",
                   "tracescore_judge_duration_seconds_bucket", "tracescore_judge_cost_usd_total",
                   "tracescore_judge_errors_total", "tracescore_evaluation_unscored_total"):
        assert family in text
    check = subprocess.run([promtool, "check", "metrics"], check=False, input=text,
                           capture_output=True, text=True, timeout=30)
    # promtool lints naming too (exit 3 = lint findings only); the format must parse
    assert "error while linting" not in check.stderr + check.stdout, check.stderr
    assert check.returncode in (0, 3), check.stderr
    provider.shutdown()


def test_the_gateway_serves_its_scorers_quality_in_metrics(tmp_path) -> None:
    """`tracescore serve`'s /metrics: the quality series, by outcome, beside its own counters."""
    import re
    import urllib.request

    from _gateway_helpers import agent_trace, sender
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from tracescore.gateway import Gateway, GatewayConfig
    from tracescore.scoring import create_content_similarity_scorer
    from tracescore.testing import OTLPReceiver

    question = "What is the capital of France?"
    with OTLPReceiver() as backend:
        gateway = Gateway(GatewayConfig(
            grpc_endpoint="127.0.0.1:0", http_endpoint="127.0.0.1:0",
            health_endpoint="127.0.0.1:0", exporter_endpoint=backend.grpc_endpoint,
            journal_path=str(tmp_path / "j.db"), journal_sync="normal", isolation="thread",
            scorers=[OnlineScorer(create_content_similarity_scorer())],
            shutdown_timeout_s=5.0)).start()
        try:
            exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{gateway.http_port}/v1/traces")
            with sender(exporter) as tracer:
                for answer in [question] * 3 + ["Bananas are yellow and curved."] * 2:
                    agent_trace(tracer, plain_children=0, question=question, answer=answer)
            backend.wait_for_spans(5, timeout=30)  # forwarded: scored
            url = f"http://127.0.0.1:{gateway.health_port}/metrics"
            with urllib.request.urlopen(url, timeout=10) as reply:
                text = reply.read().decode()
        finally:
            gateway.stop(timeout_s=5)
    results = {m.group(1): float(m.group(2)) for m in re.finditer(
        r'^tracescore_evaluation_results_total\{.*tracescore_evaluation_outcome="(\w+)".*\} (\S+)$',
        text, re.MULTILINE)}
    assert results == {"pass": 3, "fail": 2}
    assert 'gen_ai_agent_name="geo"' in text and "tracescore_evaluation_score_bucket{" in text
    assert "tracescore_gateway_received_total" in text  # its own counters still there


def test_the_collector_config_derives_outcomes_and_buckets_as_tracescore_does() -> None:
    """collector_config/quality-metrics.yaml repeats the pass labels, the 0.5 rule and the
    buckets: the same series from records as from tracescore's own metrics."""
    import re
    from pathlib import Path

    import yaml

    path = Path(__file__).resolve().parents[2] / "collector_config" / "quality-metrics.yaml"
    config = yaml.safe_load(path.read_text())
    statements = "\n".join(
        s for group in config["processors"]["transform/evaluation"]["log_statements"]
        for s in group["statements"])
    (labels,) = re.findall(r'IsMatch\([^,]+, "\^\(([\w|]+)\)\$"\)', statements)
    assert set(labels.split("|")) == q.PASSING_LABELS
    assert f'["gen_ai.evaluation.score.value"] >= {q.UNLABELLED_PASS_AT}' in statements
    metrics = {m["name"]: m for m in config["connectors"]["signal_to_metrics"]["logs"]}
    # unscored calls leave no record; the rectifiers come from people's labels, not records
    assert set(metrics) == set(q.NAMES) - {q.UNSCORED, q.RECTIFIER, q.RECTIFIER_STDERR}
    assert tuple(metrics[q.SCORE]["histogram"]["buckets"]) == q.SCORE_BUCKETS
    assert tuple(metrics[q.JUDGE_DURATION]["histogram"]["buckets"]) == q.DURATION_BUCKETS
