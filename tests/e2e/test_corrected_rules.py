"""The shipped rules' pass rate corrected by people's labels (`tracescore:pass_rate_corrected:1h`
and its interval) against `corrected_pass_rate` in Python: generated cases (results per scorer
version, labelled calls, the rectifier gauges the gateway exports) become a `promtool test rules`
file whose expected values are Python's, run by the real promtool (`make prometheus`)."""

from __future__ import annotations

import math
import random
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tracescore.calibration import CorrectedPassRate, corrected_pass_rate, rectifier

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "tracescore-rules.yaml"
STEPS = 20  # samples every 10 minutes; evaluated at 180m, after three hours of steady traffic
SCALE = 10_000  # compared as round(value * SCALE): promtool compares floats exactly


@dataclass(frozen=True)
class Case:
    agent: str
    name: str
    version: str  # "" : results and rectifier without a version label
    passes: int  # results per 10 minutes
    fails: int
    judge_labelled: tuple[bool, ...]
    human_labelled: tuple[bool, ...]
    replicas: int  # gateways exporting the same rectifier

    @property
    def labels(self) -> str:
        version = f',tracescore_scorer_version="{self.version}"' if self.version else ""
        return f'gen_ai_agent_name="{self.agent}",gen_ai_evaluation_name="{self.name}"{version}'

    def expected(self) -> CorrectedPassRate:
        judge_all = [True] * (6 * self.passes) + [False] * (6 * self.fails)  # the hour's
        return corrected_pass_rate(judge_all, self.judge_labelled, self.human_labelled)


def _cases(seed: int) -> list[Case]:
    rng = random.Random(seed)
    cases = []
    for index in range(8):
        n = rng.randint(2, 60)
        judge = tuple(rng.random() < 0.75 for _ in range(n))
        human = tuple(j if rng.random() > rng.choice((0.05, 0.2, 0.4)) else not j for j in judge)
        passes = rng.randint(0, 20)
        cases.append(Case(agent="support", name=f"Scorer {seed}-{index}",
                          version="" if index == 0 else f"v{index}", passes=passes,
                          fails=rng.randint(1 if passes == 0 else 0, 20), judge_labelled=judge,
                          human_labelled=human, replicas=1 + index % 3))
    # the same scorer version on another agent: the same rectifier corrects it
    first = cases[1]
    cases.append(Case(agent="billing", name=first.name, version=first.version, passes=3, fails=2,
                      judge_labelled=first.judge_labelled, human_labelled=first.human_labelled,
                      replicas=first.replicas))
    return cases


def _series(case: Case, stale_version: bool = False) -> list[dict[str, str]]:
    version = "old" if stale_version else case.version
    labels = case.labels.replace(f'"{case.version}"', f'"{version}"') if case.version else case.labels
    series = [{"series": f'tracescore_evaluation_results_total{{{labels},'
                         f'tracescore_evaluation_outcome="{outcome}"}}',
               "values": f"0+{count}x{STEPS}"}
              for outcome, count in (("pass", case.passes), ("fail", case.fails))]
    return series


def _gauges(case: Case) -> list[dict[str, str]]:
    r = rectifier(case.judge_labelled, case.human_labelled, name=case.name, version=case.version)
    version = f',tracescore_scorer_version="{case.version}"' if case.version else ""
    return [{"series": f'{metric}{{gen_ai_evaluation_name="{case.name}"{version},'
                       f'instance="gw-{replica}"}}',
             "values": f"{value!r}x{STEPS}"}
            for replica in range(case.replicas)
            for metric, value in (("tracescore_calibration_rectifier", r.mean),
                                  ("tracescore_calibration_rectifier_stderr", r.stderr))]


def _scaled(value: float) -> int:
    scaled = value * SCALE
    # far from a rounding tie, so that float noise cannot flip it
    assert abs(scaled - math.floor(scaled) - 0.5) > 1e-3, value
    return math.floor(scaled + 0.5)


def _test_file(cases: list[Case], stale: Case) -> dict[str, object]:
    input_series = [s for case in cases for s in _series(case)]
    input_series += [s for case in {(c.name, c.version): c for c in cases}.values()
                     for s in _gauges(case)]
    input_series += _series(stale, stale_version=True)  # a version people did not label
    tests = []
    for case in cases:
        expected = case.expected().corrected
        for rule, value in (("pass_rate_corrected", expected.rate),
                            ("pass_rate_corrected_lower", expected.low),
                            ("pass_rate_corrected_upper", expected.high)):
            tests.append({"expr": f"round(tracescore:{rule}:1h{{{case.labels}}} * {SCALE})",
                          "eval_time": "180m",
                          "exp_samples": [{"labels": f"{{{case.labels}}}",
                                           "value": _scaled(value)}]})
    stale_labels = stale.labels.replace(f'"{stale.version}"', '"old"')
    tests.append({"expr": f"tracescore:pass_rate_corrected:1h{{{stale_labels}}}",
                  "eval_time": "180m", "exp_samples": []})
    tests.append({"expr": f"tracescore:pass_rate_by_version:1h{{{stale_labels}}}",
                  "eval_time": "180m",
                  "exp_samples": [{"labels": f"tracescore:pass_rate_by_version:1h{{{stale_labels}}}",
                                   "value": stale.passes / (stale.passes + stale.fails)}]})
    return {"rule_files": [str(RULES)], "evaluation_interval": "10m",
            "tests": [{"interval": "10m", "input_series": input_series,
                       "promql_expr_test": tests}]}


@pytest.mark.parametrize("seed", [35, 36, 37])
def test_the_corrected_pass_rate_rules_agree_with_corrected_pass_rate(tmp_path: Path,
                                                                      seed: int) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing: run `make prometheus` (Debian's prometheus package)"
    cases = _cases(seed)
    stale = Case(agent="support", name=cases[2].name, version=cases[2].version, passes=4,
                 fails=1, judge_labelled=(), human_labelled=(), replicas=0)
    path = tmp_path / "corrected.test.yaml"
    path.write_text(yaml.safe_dump(_test_file(cases, stale), sort_keys=False))
    done = subprocess.run([promtool, "test", "rules", str(path)], check=False,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout + done.stderr
