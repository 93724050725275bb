"""`tracescore report --rectifiers`: the rectifier of each scorer name and version people
labelled, from the same labels as the corrected pass rates, with the judge's verdict as the
quality metrics count it (its label's band, else score >= 0.5), so that Prometheus can add it
to the live pass rate of the same scorer version."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from tracescore import _semconv as sc
from tracescore._exceptions import ConfigurationError
from tracescore.calibration import Rectifier, rectifier
from tracescore.cli._report_data import Report, human_pass
from tracescore.online.core import PASS, quality_outcome


def report_rectifiers(report: Report, labels: Mapping[str, Sequence[Mapping[str, Any]]],
                      label_column: str) -> tuple[list[Rectifier], list[str]]:
    """The rectifiers of the labelled scorers of `report` (by scorer id, as `--labels`), and
    notes on the scorer versions with too few readable labels for one."""
    rectifiers: list[Rectifier] = []
    notes: list[str] = []
    for scorer, items in labels.items():
        verdicts: dict[tuple[str, str], tuple[tuple[str, str], bool]] = {}
        for group in report.groups:
            if group.scorer != scorer:
                continue
            for r in group.results:
                if r.score is not None:
                    key = (r.name, r.version or "")
                    passed = quality_outcome({sc.GEN_AI_EVALUATION_SCORE_LABEL: r.label,
                                              sc.GEN_AI_EVALUATION_SCORE_VALUE: r.score}) == PASS
                    verdicts[(r.trace_id, r.span_id)] = (key, passed)
        pairs: dict[tuple[str, str], list[tuple[bool, bool]]] = defaultdict(list)
        for item in items:
            found = verdicts.get((str(item.get("trace_id") or "").lower(),
                                  str(item.get("span_id") or "").lower()))
            human = human_pass(item.get(label_column), report.threshold)
            if found is not None and human is not None:
                pairs[found[0]].append((found[1], human))
        for (name, version), labelled in sorted(pairs.items()):
            try:
                rectifiers.append(rectifier([j for j, _ in labelled], [h for _, h in labelled],
                                            name=name, version=version))
            except ConfigurationError as exc:
                notes.append(f"{scorer} version {version or '(none)'}: no rectifier: {exc}")
    return rectifiers, notes
