"""The rectifiers people's labels give (`tracescore report --rectifiers`) exported as gauges,
`tracescore.calibration.rectifier` and `_stderr` by scorer name and version: in process through
`OnlineScorer(rectifiers=...)` and the user's MeterProvider, and on the gateway's /metrics from
its YAML `rectifiers:` key; a bad rectifiers file is a clear configuration error."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracescore import _semconv as sc
from tracescore._exceptions import ConfigurationError
from tracescore.calibration import (
    Rectifier,
    corrected_pass_rate,
    read_rectifiers,
    rectifier,
    write_rectifiers,
)
from tracescore.online import OnlineScorer, ScoringSpanProcessor
from tracescore.scoring import create_content_similarity_scorer

NAME = create_content_similarity_scorer().name


def _points(reader: InMemoryMetricReader) -> dict[str, dict[tuple[Any, ...], float]]:
    found: dict[str, dict[tuple[Any, ...], float]] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for p in metric.data.data_points:
                    found.setdefault(metric.name, {})[tuple(sorted(p.attributes.items()))] = p.value
    return found


verdicts = st.lists(st.tuples(st.booleans(), st.booleans()), min_size=2, max_size=60)


@settings(max_examples=100, deadline=None)
@given(verdicts, st.lists(st.booleans(), min_size=2, max_size=200))
def test_a_rectifier_is_the_correction_of_corrected_pass_rate(
        pairs: list[tuple[bool, bool]], judge_all: list[bool]) -> None:
    judge, human = [j for j, _ in pairs], [h for _, h in pairs]
    r = rectifier(judge, human, name="X", version="v")
    expected = corrected_pass_rate(judge_all, judge, human)
    assert r.mean == pytest.approx(expected.corrected.rate - expected.judge_only.rate, abs=1e-12)
    # the corrected interval's variance: the judge's over all calls plus stderr²
    judge_var = (expected.judge_only.rate * (1 - expected.judge_only.rate)
                 * len(judge_all) / (len(judge_all) - 1))
    half = 1.959964 * math.sqrt(judge_var / len(judge_all) + r.stderr ** 2)
    assert expected.corrected.high == pytest.approx(min(1.0, expected.corrected.rate + half),
                                                    abs=1e-6)


def test_online_scorer_exports_its_rectifiers_as_gauges(tmp_path: Path) -> None:
    """The gauges carry the file's rectifiers of this scorer (every version), no other's; a
    rectifier without a version has no version attribute, as results without one."""
    path = tmp_path / "rectifiers.json"
    write_rectifiers(path, [
        rectifier([True] * 8 + [False] * 2, [True] * 6 + [False] * 4, name=NAME, version="v2"),
        rectifier([True, False, True], [True, True, True], name=NAME),
        rectifier([True, True], [False, True], name="Someone Else", version="v1")])
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    processor = ScoringSpanProcessor(
        SimpleSpanProcessor(InMemorySpanExporter()), scorers=[OnlineScorer(create_content_similarity_scorer(), rectifiers=path)],
        meter_provider=provider)
    try:
        found = _points(reader)
    finally:
        processor.shutdown()
        provider.shutdown()
    v2 = ((sc.GEN_AI_EVALUATION_NAME, NAME), (sc.TS_SCORER_VERSION, "v2"))
    plain = ((sc.GEN_AI_EVALUATION_NAME, NAME),)
    assert found["tracescore.calibration.rectifier"] == {
        v2: pytest.approx(-0.2), plain: pytest.approx(1 / 3)}
    diffs = [0] * 6 + [-1] * 2 + [0] * 2
    variance = sum((d + 0.2) ** 2 for d in diffs) / 9
    assert found["tracescore.calibration.rectifier_stderr"][v2] == pytest.approx(
        math.sqrt(variance / 10))


def test_online_scorer_refuses_a_file_without_its_scorer(tmp_path: Path) -> None:
    path = tmp_path / "rectifiers.json"
    write_rectifiers(path, [rectifier([True, True], [False, True], name="Faithfulness")])
    with pytest.raises(ConfigurationError, match=r"no rectifier of scorer .* \(it has: Faithfulness\)"):
        OnlineScorer(create_content_similarity_scorer(), rectifiers=path)
    with pytest.raises(ConfigurationError, match="Rectifier objects"):
        OnlineScorer(create_content_similarity_scorer(), rectifiers=[0.1])  # type: ignore[list-item]
    other = rectifier([True, True], [False, True], name="Faithfulness")
    with pytest.raises(ConfigurationError, match="was given the rectifier of 'Faithfulness'"):
        OnlineScorer(create_content_similarity_scorer(), rectifiers=[other])


_GOOD = {"name": "Answer Relevancy", "scorer_version": "v1", "mean": -0.1, "variance": 0.2,
         "n": 30}


@pytest.mark.parametrize(("content", "said"), [
    (b"\xff\xfe", "not UTF-8"),
    (b"{", "invalid JSON"),
    (b"[]", "not a rectifiers file"),
    (json.dumps({"format": "tracescore.rectifiers", "version": 9, "rectifiers": []}).encode(),
     "version 9 is not supported"),
    (json.dumps({"format": "tracescore.rectifiers", "version": 1, "rectifiers": {}}).encode(),
     '"rectifiers" must be a list'),
    (json.dumps({"format": "tracescore.rectifiers", "version": 1,
                 "rectifiers": [{**_GOOD, "mean": 3}]}).encode(), r"rectifiers\[0\].*mean"),
    (json.dumps({"format": "tracescore.rectifiers", "version": 1,
                 "rectifiers": [{**_GOOD, "n": 0}]}).encode(), "n must be"),
    (json.dumps({"format": "tracescore.rectifiers", "version": 1,
                 "rectifiers": [_GOOD, "x"]}).encode(), r"rectifiers\[1\] must be an object"),
    (json.dumps({"format": "tracescore.rectifiers", "version": 1,
                 "rectifiers": [{k: v for k, v in _GOOD.items() if k != "variance"}]}).encode(),
     "has no 'variance'"),
    (json.dumps({"format": "tracescore.rectifiers", "version": 1,
                 "rectifiers": [_GOOD, _GOOD]}).encode(), "two rectifiers for scorer"),
])
def test_a_bad_rectifiers_file_is_a_clear_error(tmp_path: Path, content: bytes, said: str) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(content)
    with pytest.raises(ConfigurationError, match=said):
        read_rectifiers(path)
    with pytest.raises(ConfigurationError, match=said):
        OnlineScorer(create_content_similarity_scorer(), rectifiers=path)


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.sampled_from(
                        ["format", "version", "rectifiers", "name", "scorer_version", "mean",
                         "variance", "n"]), inner, max_size=5), max_leaves=12))
def test_any_json_reads_as_rectifiers_or_a_configuration_error(value: Any) -> None:
    """Whatever the file holds, reading it never fails with anything but a clear error."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "r.json"
        document = ({"format": "tracescore.rectifiers", "version": 1, "rectifiers": value}
                    if isinstance(value, list) else value)
        path.write_text(json.dumps(document))
        try:
            found = read_rectifiers(path)
        except ConfigurationError as exc:
            assert str(exc).startswith(f"rectifiers file {str(path)!r}: ")
        else:
            assert all(isinstance(r, Rectifier) and -1 <= r.mean <= 1 for r in found)
            assert read_rectifiers(path) == found


def test_the_gateway_serves_the_rectifiers_of_its_config_in_metrics(tmp_path: Path) -> None:
    """`rectifiers: PATH` (beside the YAML file) becomes gauges on /metrics, valid exposition."""
    from tracescore.gateway import Gateway
    from tracescore.gateway._config import load_gateway_config
    from tracescore.testing import OTLPReceiver

    write_rectifiers(tmp_path / "rect.json", [
        rectifier([True] * 3 + [False], [True, False, False, False], name="Answer Relevancy",
                  version="abc"),
        rectifier([True, True], [True, False], name='Say "hi"')])
    (tmp_path / "gateway.yaml").write_text(
        "receivers: {grpc: '127.0.0.1:0', http: '127.0.0.1:0', health: '127.0.0.1:0'}\n"
        f"journal: {{path: {tmp_path / 'j.db'}, sync: normal}}\n"
        "scoring: {isolation: thread, scorers: [{scorer: content-similarity}]}\n"
        "rectifiers: rect.json\n")
    with OTLPReceiver() as backend:
        config = load_gateway_config(tmp_path / "gateway.yaml", environ={},
                                     overrides={"exporter.endpoint": backend.grpc_endpoint})
        gateway = Gateway(config).start()
        try:
            url = f"http://127.0.0.1:{gateway.health_port}/metrics"
            with urllib.request.urlopen(url, timeout=10) as reply:
                text = reply.read().decode()
        finally:
            gateway.stop(timeout_s=5)
    assert ('tracescore_calibration_rectifier{gen_ai_evaluation_name="Answer Relevancy",'
            'tracescore_scorer_version="abc"} -0.5\n') in text
    assert 'tracescore_calibration_rectifier{gen_ai_evaluation_name="Say \\"hi\\""} -0.5\n' in text
    assert "# TYPE tracescore_calibration_rectifier_stderr gauge" in text
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing: run `make prometheus`"
    check = subprocess.run([promtool, "check", "metrics"], check=False, input=text,
                           capture_output=True, text=True, timeout=30)
    assert "error while linting" not in check.stderr + check.stdout, check.stderr
    assert check.returncode in (0, 3), check.stderr


def test_serve_exits_2_on_a_bad_rectifiers_file(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tracescore.cli import main

    (tmp_path / "rect.json").write_text("{}")
    (tmp_path / "gateway.yaml").write_text("rectifiers: rect.json\n")
    result = CliRunner().invoke(main, ["serve", "--config", str(tmp_path / "gateway.yaml")])
    assert result.exit_code == 2, result.output
    assert "rectifiers: rectifiers file" in result.output
    assert "not a rectifiers file" in result.output
    assert "Traceback" not in result.output
