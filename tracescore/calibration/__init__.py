"""Calibration: how well a scorer agrees with human labels, and the files people label.

    report = calibrate("labels.jsonl", "relevancy", judge_model="openai/gpt-4o-mini")
    print(report.agreement.kappa, report.disagreements[:5])

`sample_calls` draws scored agent calls from stored traces into a labelling file;
`read_phoenix_labels` reads the labels people gave in Phoenix as a calibration dataset.
`corrected_pass_rate` corrects a judge's pass rate by people's labels on a subset;
`rectifier` is that correction per scorer version, `write_rectifiers` / `read_rectifiers` its
file, which the gateway and `OnlineScorer` export as gauges for Prometheus.
"""

from __future__ import annotations

from tracescore.calibration._corrected import CorrectedPassRate, PassRate, corrected_pass_rate
from tracescore.calibration._labels import LabelSpace, LabelSpec
from tracescore.calibration._rectifiers import rectifier, write_rectifiers
from tracescore.calibration._report import (
    CalibrationError,
    CalibrationReport,
    CalibrationRow,
    RunCost,
    calibrate,
)
from tracescore.calibration._stats import Agreement, Interval
from tracescore.online.core import Rectifier, read_rectifiers

__all__ = [
    "Agreement",
    "CalibrationError",
    "CalibrationReport",
    "CalibrationRow",
    "CorrectedPassRate",
    "Interval",
    "LabelSpace",
    "LabelSpec",
    "PassRate",
    "Rectifier",
    "RunCost",
    "calibrate",
    "corrected_pass_rate",
    "read_rectifiers",
    "rectifier",
    "write_rectifiers",
]
