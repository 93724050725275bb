"""The shipped Prometheus rules and Grafana dashboard: `promtool check rules`, the rules' own
`promtool test rules` unit tests, and end to end: tracescore scores live calls, the real collector
(collector_config/quality-metrics.yaml) turns its log records into metrics, a real Prometheus
scrapes it (and the gateway's /metrics) and evaluates the rules on short windows: a quality drop
fires, the same drop on too few calls does not, silence fires no-data; then every dashboard
panel's query returns the series it should."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _helpers import shut_down_pipelines
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore import _semconv as sc
from tracescore.calibration import Rectifier
from tracescore.gateway import Gateway, GatewayConfig
from tracescore.instrument._calls import AgentCall, notify_agent_call
from tracescore.online import OnlineScorer, ScoringSpanProcessor
from tracescore.scoring._provenance import scorer_version
from tracescore.testing import OTelCollector, OTLPReceiver, Reply, StubLLMServer
from tracescore.testing._tools import free_port, port_open

ROOT = Path(__file__).resolve().parents[2]
RULES_DIR = ROOT / "deploy" / "prometheus"
RULES = RULES_DIR / "tracescore-rules.yaml"
DASHBOARD = ROOT / "deploy" / "grafana" / "tracescore-quality.json"
COLLECTOR_CONFIG = ROOT / "collector_config" / "quality-metrics.yaml"
# the rules' windows, shortened for a test that lasts a minute: (shipped text, test text)
SHORT_WINDOWS = (("[1w] offset 1h", "[30s] offset 10s"), ("[1h]", "[10s]"), ("[15m]", "[10s]"),
                 ("for: 15m", "for: 2s"), ("for: 10m", "for: 2s"), ("for: 5m", "for: 2s"))
RECTIFIER: dict[str, Any] = {"mean": -0.12, "variance": 0.3, "n": 40}  # of Content Similarity
QUESTION = "What is the capital of France?"
GOOD = "Paris is the capital of France."
BAD = "I am sorry, I cannot help with bananas today."


def promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool missing: run `make prometheus` (Debian's prometheus package)"
    return found


def run_promtool(*args: str, cwd: Path = RULES_DIR) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], check=False, capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def test_rules_pass_promtool_check() -> None:
    result = run_promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_rules_unit_tests_pass() -> None:
    result = run_promtool("test", "rules", "tracescore-rules.test.yaml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_rule_tests_catch_a_missing_minimum_sample(tmp_path: Path) -> None:
    """Without a minimum sample size, the quiet agent's drop on 6 calls would page: the unit
    tests say so."""
    guard = "and tracescore:results:increase1h >= 30"
    rules = RULES.read_text()
    assert guard in rules
    (tmp_path / RULES.name).write_text(rules.replace(guard, "", 1))
    shutil.copy(RULES_DIR / "tracescore-rules.test.yaml", tmp_path)
    result = run_promtool("test", "rules", "tracescore-rules.test.yaml", cwd=tmp_path)
    assert result.returncode != 0
    assert 'gen_ai_agent_name="quiet"' in result.stdout + result.stderr


def short_rules(text: str) -> str:
    for shipped, short in SHORT_WINDOWS:
        assert shipped in text, shipped
        text = text.replace(shipped, short)
    return text


def wilson(passes: float, n: float, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval, written from its definition: the p whose normal test at z
    does not reject the observed rate, i.e. the roots of (p̂ - p)² = z² p (1 - p) / n."""
    phat = passes / n
    a = 1 + z * z / n
    b = -(2 * phat + z * z / n)
    c = phat * phat
    root = math.sqrt(b * b - 4 * a * c)
    return (-b - root) / (2 * a), (-b + root) / (2 * a)


# --- end to end ------------------------------------------------------------------------------
class Prometheus:
    """Debian's Prometheus server on a free loopback port, with `config` and `rules`."""

    def __init__(self, folder: Path, scrape: dict[str, str], rules: str,
                 relabel: dict[str, str]) -> None:
        self.port = free_port()
        (folder / "rules.yaml").write_text(rules)
        jobs = []
        for job, target in scrape.items():
            entry: dict[str, Any] = {"job_name": job, "static_configs": [{"targets": [target]}]}
            if job in relabel:
                entry["metric_relabel_configs"] = [
                    {"source_labels": ["__name__"], "regex": relabel[job], "action": "keep"}]
            jobs.append(entry)
        config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                  "rule_files": [str(folder / "rules.yaml")], "scrape_configs": jobs}
        (folder / "prometheus.yml").write_text(json.dumps(config))
        self.log = folder / "prometheus.log"
        binary = shutil.which("prometheus")
        assert binary, "prometheus missing: run `make prometheus`"
        self.command = [binary, f"--config.file={folder / 'prometheus.yml'}",
                        f"--storage.tsdb.path={folder / 'data'}",
                        f"--web.listen-address=127.0.0.1:{self.port}"]
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Prometheus:  # noqa: PYI034
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(self.command, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if port_open(self.port) and self._get("/-/ready", raw=True) == "ready":
                return self
            assert self.process.poll() is None, self.log.read_text()
            time.sleep(0.2)
        raise AssertionError(f"prometheus did not start: {self.log.read_text()[-2000:]}")

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def _get(self, path: str, raw: bool = False) -> Any:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as r:
                body = r.read().decode()
        except OSError:
            return None
        return body.strip().lower().split()[-1].rstrip(".") if raw else json.loads(body)

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": expr} if at is None else {"query": expr, "time": f"{at:.3f}"}
        answer = self._get("/api/v1/query?" + urllib.parse.urlencode(params))
        assert answer and answer["status"] == "success", (expr, answer)
        return list(answer["data"]["result"])

    def alerts(self) -> list[dict[str, Any]]:
        answer = self._get("/api/v1/alerts")
        return list(answer["data"]["alerts"]) if answer else []


def judge(request: dict[str, Any]) -> Reply:
    """The stub judge's answers to each answer-relevancy step."""
    step = request.get("response_format", {}).get("json_schema", {}).get("name", "")
    if step.endswith("statements"):
        return Reply(content={"statements": [GOOD]})
    if step.endswith("verdicts"):
        return Reply(content={"results": [{"result": "yes", "reason": "answers it"}]})
    return Reply(content={"reason": "The score is 1 because it answers the question."})


@pytest.fixture
def stack(tmp_path: Path, stub_llm: StubLLMServer) -> Iterator[dict[str, Any]]:
    """The collector, an idle gateway and Prometheus scraping both; an in-process producer."""
    stub_llm.responder = judge
    prom_port = free_port()
    with OTLPReceiver() as backend, OTelCollector(
        COLLECTOR_CONFIG, overrides={"exporters::prometheus::endpoint": f"127.0.0.1:{prom_port}"},
        env={"BACKEND_OTLP_ENDPOINT": backend.grpc_endpoint.removeprefix("http://")},
    ) as collector:
        gateway = Gateway(GatewayConfig(
            grpc_endpoint="127.0.0.1:0", http_endpoint="127.0.0.1:0",
            health_endpoint="127.0.0.1:0", exporter_endpoint=backend.grpc_endpoint,
            journal_path=str(tmp_path / "j.db"), journal_sync="normal", isolation="thread",
            scorers=[OnlineScorer(tracescore.create_content_similarity_scorer())],
            shutdown_timeout_s=5.0)).start()
        try:
            with Prometheus(tmp_path, {"collector": f"127.0.0.1:{prom_port}",
                                       "gateway": f"127.0.0.1:{gateway.health_port}"},
                            short_rules(RULES.read_text()),
                            relabel={"gateway": "tracescore_gateway_.*"}) as prometheus:
                yield {"prometheus": prometheus, "collector": collector, "stub": stub_llm}
        finally:
            gateway.stop(timeout_s=5)


@pytest.fixture
def producer(stack: dict[str, Any]) -> Iterator[Callable[[str, str], None]]:
    """tracescore in process: scorers with the log sink, its metrics over OTLP, to the collector."""
    collector, stub = stack["collector"], stack["stub"]
    base = f"http://127.0.0.1:{collector.http_port}"
    logs = LoggerProvider()
    logs.add_log_record_processor(BatchLogRecordProcessor(
        OTLPLogExporter(endpoint=f"{base}/v1/logs"), schedule_delay_millis=100))
    meters = MeterProvider(metric_readers=[PeriodicExportingMetricReader(
        OTLPMetricExporter(endpoint=f"{base}/v1/metrics"), export_interval_millis=1000)])
    judged: dict[str, Any] = {"model": "openai/gpt-4o-mini", "api_key": "sk-test", "timeout": 5,
              "backoff_base_s": 0.001, "backoff_max_s": 0.01}
    similarity = tracescore.create_content_similarity_scorer()
    scorers = [
        # people's labels of its version: its rectifier, exported through the collector
        OnlineScorer(similarity, sinks=["log"], rectifiers=[Rectifier(
            name=similarity.name, version=scorer_version(similarity), **RECTIFIER)]),
        # a judge that spends its tiny budget on the first calls: budget_exhausted after
        OnlineScorer(tracescore.create_answer_relevancy_scorer(api_base=stub.base_url, **judged),
                     rate=0.2, budget_usd_per_hour=1e-9, sinks=["log"]),
        # a judge nobody answers: failed runs
        OnlineScorer(tracescore.create_toxicity_scorer(
            api_base=f"http://127.0.0.1:{free_port()}/v1", max_retries=0, **judged),
            rate=0.1, sinks=["log"]),
    ]
    provider = TracerProvider()
    provider.add_span_processor(ScoringSpanProcessor(
        SimpleSpanProcessor(InMemorySpanExporter()), scorers, isolation="thread",
        meter_provider=meters, logger_provider=logs))
    tracer = provider.get_tracer("test")

    def call(agent: str, output: str) -> None:
        attrs = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: agent}
        with tracer.start_as_current_span(f"invoke_agent {agent}", attributes=attrs) as span:
            notify_agent_call(AgentCall(span=span, name=agent, input=QUESTION, output=output,
                                        error=None, ground_truth=GOOD, attributes=attrs))

    yield call
    provider.shutdown()
    meters.shutdown()
    logs.shutdown()
    shut_down_pipelines()


def firing(prometheus: Prometheus, name: str) -> set[str]:
    return {a["labels"].get("gen_ai_agent_name", a["labels"].get("gen_ai_evaluation_name", ""))
            for a in prometheus.alerts()
            if a["labels"]["alertname"] == name and a["state"] == "firing"}


def traffic(call: Callable[[str, str], None], seconds: float, *, drop: bool,
            until: Callable[[], bool] = lambda: False) -> None:
    """support: 10 calls/s; quiet: 1/s; gone: 4/s before the drop, none after."""
    start = time.monotonic()
    tick = 0
    while time.monotonic() - start < seconds and not until():
        output = BAD if drop else GOOD
        call("support", output)
        if tick % 10 == 0:
            call("quiet", output)
        if not drop and tick % 5 == 0:
            call("gone", GOOD)
        tick += 1
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_quality_drop_fires_on_enough_calls_and_silence_fires_no_data(stack, producer) -> None:
    prometheus: Prometheus = stack["prometheus"]
    traffic(producer, 35, drop=False)  # the baseline: 30 s of good answers
    assert firing(prometheus, "TracescorePassRateDrop") == set()
    seen_quiet: list[set[str]] = []

    def fired() -> bool:
        drops = firing(prometheus, "TracescorePassRateDrop")
        seen_quiet.append(drops)
        return "support" in drops and "gone" in firing(prometheus, "TracescoreNoScores")

    traffic(producer, 60, drop=True, until=fired)
    assert fired(), prometheus.alerts()
    assert not any("quiet" in drops for drops in seen_quiet)  # the same drop on 1 call/s
    assert "Answer Relevancy" in firing(prometheus, "TracescoreBudgetExhausted") | {
        a["labels"]["gen_ai_evaluation_name"] for a in prometheus.alerts()
        if a["labels"]["alertname"] == "TracescoreBudgetExhausted"}
    assert "Toxicity" in {a["labels"]["gen_ai_evaluation_name"] for a in prometheus.alerts()
                          if a["labels"]["alertname"] == "TracescoreJudgeErrors"}

    # the interval Prometheus recorded is the Wilson interval of the counts it recorded
    at = time.time() - 2  # one evaluation, recorded by now
    series = {}
    for rule in ("results:increase1h", "passes:increase1h", "pass_rate_lower:1h",
                 "pass_rate_upper:1h"):
        (point,) = prometheus.query(f'tracescore:{rule}{{gen_ai_agent_name="support",'
                                    f'gen_ai_evaluation_name="Content Similarity"}}', at)
        series[rule] = float(point["value"][1])
    assert series["results:increase1h"] >= 30
    lower, upper = wilson(series["passes:increase1h"], series["results:increase1h"])
    assert series["pass_rate_lower:1h"] == pytest.approx(lower, abs=1e-9)
    assert series["pass_rate_upper:1h"] == pytest.approx(upper, abs=1e-9)

    # the pass rate corrected by the rectifier gauges that came through the collector
    selector = '{gen_ai_agent_name="support",gen_ai_evaluation_name="Content Similarity"}'
    for rule in ("results_by_version:increase1h", "pass_rate_by_version:1h",
                 "pass_rate_corrected:1h", "pass_rate_corrected_lower:1h",
                 "pass_rate_corrected_upper:1h"):
        (point,) = prometheus.query(f"tracescore:{rule}{selector}", at)
        series[rule] = float(point["value"][1])
    n, p = series["results_by_version:increase1h"], series["pass_rate_by_version:1h"]
    corrected = p + RECTIFIER["mean"]
    half = 1.959964 * math.sqrt(p * (1 - p) / (n - 1) + RECTIFIER["variance"] / RECTIFIER["n"])
    assert series["pass_rate_corrected:1h"] == pytest.approx(corrected, abs=1e-9)
    assert series["pass_rate_corrected_lower:1h"] == pytest.approx(max(0, corrected - half), abs=1e-9)
    assert series["pass_rate_corrected_upper:1h"] == pytest.approx(min(1, corrected + half), abs=1e-9)

    # each result series once: the collector dropped tracescore's own copy of what the records
    # give (filter/derived), and passed its unscored counts on
    keys = "gen_ai_agent_name, gen_ai_evaluation_name, gen_ai_evaluation_score_label, " \
           "tracescore_evaluation_outcome, tracescore_scorer_version"
    copies = prometheus.query(f"count by ({keys}) (tracescore_evaluation_results_total)")
    assert copies and {point["value"][1] for point in copies} == {"1"}
    unscored = prometheus.query("tracescore_evaluation_unscored_total")
    assert {p["metric"]["otel_scope_name"] for p in unscored} == {"tracescore.online"}

    check_dashboard(prometheus)


# what each panel's queries must return: (label, values that must appear) per panel title
PANEL_EXPECTS: dict[str, tuple[str, set[str]]] = {
    "Pass rate of $scorer (95 % Wilson interval, last hour)": (
        "gen_ai_agent_name", {"support", "quiet"}),
    "Scored results per hour, and the calls they stand for": (
        "gen_ai_evaluation_name", {"Content Similarity", "Answer Relevancy"}),
    "Score distribution": ("le", {"0", "1", "+Inf"}),
    "Mean score (last hour)": ("gen_ai_agent_name", {"support", "quiet"}),
    "Unscored calls by reason": ("tracescore_evaluation_unscored_reason", {"budget_exhausted"}),
    "Judge cost per hour": ("gen_ai_request_model", {"openai/gpt-4o-mini"}),
    "Judge calls and tokens per second": ("gen_ai_evaluation_name", {"Answer Relevancy"}),
    "Judge time per run (p50, p95)": ("gen_ai_evaluation_name", {"Answer Relevancy"}),
    "Failed scorer runs": ("gen_ai_evaluation_name", {"Toxicity"}),
    "Gateway scoring backlog": ("instance", set()),  # the gateway's address, whatever it is
}


def panel_queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for panel in dashboard["panels"]:
        for target in panel.get("targets", ()):
            yield panel["title"], target["expr"]


def check_dashboard(prometheus: Prometheus) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {"$agent": ".*", "$scorer": ".*", "$__rate_interval": "20s"}
    titles = {title for title, _ in panel_queries(dashboard)}
    assert titles == set(PANEL_EXPECTS)  # every panel has its expectation
    for title, expr in panel_queries(dashboard):
        query = re.sub(r"\$\w+", lambda m: variables[m.group(0)], expr)
        result = prometheus.query(query)
        assert result, f"panel {title!r}: {query} returned nothing"
        label, wanted = PANEL_EXPECTS[title]
        values = {r["metric"].get(label) for r in result}
        assert None not in values and wanted <= values, (title, query, values)
    # the template variables list the agents and scorers
    for variable in dashboard["templating"]["list"][1:]:
        metric, label = re.match(r"label_values\((\w+), (\w+)\)", variable["definition"]).groups()
        assert prometheus.query(f"count by ({label}) ({metric})")
