"""The scoring core's internal API, for the front doors outside `online/` (the gateway, its
`rescore` and `inspect`): they import the core from here and span reading from
`tracescore.online.intake`, never from the private modules behind either.

- the core: `ScoringCore` (and its shared tail `ScoringCore.take`), `Call`, `ScoreRun`,
  `EventPayload`, `OnlineMetrics`, `release_budgets`, the drop reasons (`FLUSH`, `SHUTDOWN`,
  `NO_LLM_CALLS`, `HELD_OVERFLOW`);
- scorers and options: `OnlineScorer`, `as_online_scorers`, `ProcessorOptions`,
  `reference_key`, `reference_fallback`, `fleet_limiter_from`, `RANDOMNESS_MASK`;
- conversations: `Turn`, `as_conversation_options`, `turn_ref`, `carrier_fields`, `MAX_LINKS`;
  the quiet period the run and conversation scopes share: `QuietTable`, `Group`, `AGE`,
  `OVERFLOW`;
- the quality metrics' names (the gateway's /metrics serves them too): `QUALITY_NAMES`, and a
  result's pass or fail as they count it: `quality_outcome`, `PASS`;
- people's corrections of a pass rate (`tracescore.calibration` computes them, the gauges export
  them): `Rectifier`, `read_rectifiers`, `rectifiers_json`;
- carrier spans: `SCOPE`, `carrier_attributes`, `carrier_time`; the judge's own spans:
  `JudgeSpan`, `JUDGE_SCOPE`, `judge_attributes`.
"""

from tracescore.online._conversation_scope import MAX_LINKS, carrier_fields, turn_ref
from tracescore.online._conversations import Turn, as_conversation_options
from tracescore.online._core import ScoringCore
from tracescore.online._delivery import ScoreRun
from tracescore.online._events import EventPayload
from tracescore.online._fleet_limits import fleet_limiter_from
from tracescore.online._jobs import Call, release_budgets
from tracescore.online._judge_spans import SCOPE as JUDGE_SCOPE
from tracescore.online._judge_spans import JudgeSpan, judge_attributes
from tracescore.online._metrics import FLUSH, HELD_OVERFLOW, NO_LLM_CALLS, SHUTDOWN, OnlineMetrics
from tracescore.online._options import (
    OnlineScorer,
    ProcessorOptions,
    as_online_scorers,
    reference_fallback,
    reference_key,
)
from tracescore.online._quality import NAMES as QUALITY_NAMES
from tracescore.online._quality import PASS
from tracescore.online._quality import outcome as quality_outcome
from tracescore.online._quiet import AGE, OVERFLOW, Group, QuietTable
from tracescore.online._rectifiers import Rectifier, read_rectifiers, rectifiers_json
from tracescore.online._sampling import RANDOMNESS_MASK
from tracescore.online._sinks import SCOPE, carrier_attributes, carrier_time

__all__ = [
    "AGE",
    "FLUSH",
    "HELD_OVERFLOW",
    "JUDGE_SCOPE",
    "MAX_LINKS",
    "NO_LLM_CALLS",
    "OVERFLOW",
    "PASS",
    "QUALITY_NAMES",
    "RANDOMNESS_MASK",
    "SCOPE",
    "SHUTDOWN",
    "Call",
    "EventPayload",
    "Group",
    "JudgeSpan",
    "OnlineMetrics",
    "OnlineScorer",
    "ProcessorOptions",
    "QuietTable",
    "Rectifier",
    "ScoreRun",
    "ScoringCore",
    "Turn",
    "as_conversation_options",
    "as_online_scorers",
    "carrier_attributes",
    "carrier_fields",
    "carrier_time",
    "fleet_limiter_from",
    "judge_attributes",
    "quality_outcome",
    "read_rectifiers",
    "rectifiers_json",
    "reference_fallback",
    "reference_key",
    "release_budgets",
    "turn_ref",
]
