"""The calibration report as one self-contained HTML page: the figures, the confusion matrix and a
score scatter as inline SVG, and the disagreements worst first (no script, no external file)."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

from tracescore._private_files import write_private
from tracescore.calibration._report import CalibrationReport, CalibrationRow

STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem;color:#1f2328;max-width:70rem}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #d0d7de;padding:.3rem .6rem;
text-align:left;vertical-align:top}th{background:#f6f8fa}.num{text-align:right}
.pass{color:#1a7f37;font-weight:bold}.fail{color:#cf222e;font-weight:bold}
.figs{display:flex;gap:3rem;flex-wrap:wrap;align-items:flex-start}figure{margin:0}
"""
_CELL = 56  # px of one confusion matrix cell
_PLOT = 320  # px of the scatter's square


def write_html(report: CalibrationReport, path: str | Path) -> None:
    """Write `report` as an HTML page to `path`."""
    write_private(path, html_report(report))


def html_report(report: CalibrationReport) -> str:
    """The HTML page of `report`."""
    title = f"Calibration of {report.scorer_id}"
    figures = ("<div class=figs><figure><figcaption>Confusion matrix (rows: people, columns: "
               f"judge)</figcaption>{confusion_svg(report)}</figure><figure><figcaption>Judge "
               f"score by human label</figcaption>{scatter_svg(report)}</figure></div>")
    parts = [(f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{escape(title)}"
              f"</title><style>{STYLE}</style></head><body><h1>{escape(title)}</h1>"),
             figures, _summary(report), _disagreements(report), "</body></html>"]
    return "\n".join(parts)


def _summary(report: CalibrationReport) -> str:
    a, space = report.agreement, report.space
    rows = [("Scorer", report.scorer_id), ("Scorer version", report.scorer_version or "-"),
            ("Judge model", report.judge_model or "-"),
            ("Labels", f"{space.kind}: {', '.join(space.categories)}"),
            ("Items", (f"{a.n} scored, {report.unlabelled} unlabelled, {len(report.errors)} "
                      "errors"))]
    rows += [(name, _with_interval(report, key, value)) for name, key, value in stat_rows(report)]
    cost = report.cost
    rows.append(("Judge calls", (f"{cost.judge_calls} ({cost.input_tokens} input, "
                                f"{cost.output_tokens} output tokens)")))
    rows.append(("Cost", "unknown" if cost.cost_usd is None else f"${cost.cost_usd:.4f}"))
    rows.append(("Time", f"{cost.duration_s:.1f} s, {_num(cost.mean_latency_ms, 0)} ms per item"))
    if report.passed is not None:
        verdict = ("<span class=pass>PASSED</span>" if report.passed
                   else "<span class=fail>FAILED</span>")
        rows.append(("Gate", (f"{verdict} kappa {_num(report.gate_kappa)} against minimum "
                             f"{report.min_kappa:g}")))
    body = "".join(f"<tr><th>{escape(k)}</th><td>{v if k == 'Gate' else escape(v)}</td></tr>"
                   for k, v in rows)
    return f"<table>{body}</table>"


def stat_rows(report: CalibrationReport) -> list[tuple[str, str, float | None]]:
    """(title, key in `intervals`, value) of the statistics shown for this label space."""
    a, kind = report.agreement, report.space.kind
    rows: list[tuple[str, str, float | None]] = [("Cohen's kappa", "kappa", a.kappa)]
    if kind == "categories":
        rows += [("Weighted kappa (linear)", "kappa_linear", a.kappa_linear),
                 ("Weighted kappa (quadratic)", "kappa_quadratic", a.kappa_quadratic),
                 ("Pass/fail kappa", "pass_kappa", a.pass_kappa)]
    rows += [("Accuracy", "accuracy", a.accuracy),
             ("Base rate (human pass)", "base_rate", a.base_rate),
             ("Judge pass rate", "judge_pass_rate", a.judge_pass_rate),
             ("TPR (human pass, judge pass)", "tpr", a.tpr),
             ("TNR (human fail, judge fail)", "tnr", a.tnr),
             ("Spearman", "spearman", a.spearman)]
    if kind == "score":
        rows.append(("Mean difference (judge - human)", "mean_difference", a.mean_difference))
    return rows


def _with_interval(report: CalibrationReport, key: str, value: float | None) -> str:
    interval = report.agreement.intervals.get(key)
    if interval is None or value is None:
        return _num(value)
    level = round(report.agreement.confidence * 100)
    return f"{_num(value)} ({level}% CI {_num(interval.low)} to {_num(interval.high)})"


def confusion_svg(report: CalibrationReport) -> str:
    """The confusion matrix as SVG: people's categories as rows, the judge's as columns."""
    names, matrix = report.space.categories, report.agreement.confusion
    largest = max((v for row in matrix for v in row), default=0) or 1
    left, top = 110, 40
    size = len(names) * _CELL
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + size + 10}" '
           f'height="{top + size + 10}" font-family="sans-serif" font-size="12">')]
    for j, name in enumerate(names):
        x = left + j * _CELL + _CELL / 2
        out.append(f'<text x="{x}" y="{top - 8}" text-anchor="middle">{_short(name)}</text>')
    for i, name in enumerate(names):
        y = top + i * _CELL
        out.append(f'<text x="{left - 8}" y="{y + _CELL / 2 + 4}" text-anchor="end">'
                   f'{_short(name)}</text>')
        for j, count in enumerate(matrix[i]):
            shade = 0.12 + 0.78 * count / largest
            color = "26,127,55" if i == j else "207,34,46"
            out.append(f'<rect x="{left + j * _CELL}" y="{y}" width="{_CELL}" height="{_CELL}" '
                       f'fill="rgba({color},{shade:.2f})" stroke="#fff"/>')
            out.append(f'<text x="{left + j * _CELL + _CELL / 2}" y="{y + _CELL / 2 + 4}" '
                       f'text-anchor="middle">{count}</text>')
    out.append("</svg>")
    return "".join(out)


def scatter_svg(report: CalibrationReport) -> str:
    """Each item's judge score (as goodness, 0..1) against its human label (categories spread
    along x, scores at their value), agreements green, disagreements red."""
    space, rows = report.space, report.rows
    left, top, pad = 50, 15, 20
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + _PLOT + pad}" '
           f'height="{top + _PLOT + 45}" font-family="sans-serif" font-size="12">'),
           (f'<rect x="{left}" y="{top}" width="{_PLOT}" height="{_PLOT}" fill="none" '
           f'stroke="#d0d7de"/>')]
    for tick in (0.0, 0.5, 1.0):
        y = top + _PLOT * (1 - tick)
        out.append(f'<text x="{left - 6}" y="{y + 4}" text-anchor="end">{tick:g}</text>')
    for cut in (space.cuts if space.kind == "categories" else (space.threshold,)):
        y = top + _PLOT * (1 - cut)
        out.append(f'<line x1="{left}" x2="{left + _PLOT}" y1="{y}" y2="{y}" stroke="#8c959f" '
                   f'stroke-dasharray="4 3"/>')
    if space.kind == "score":
        out.append(f'<text x="{left + _PLOT / 2}" y="{top + _PLOT + 32}" text-anchor="middle">'
                   f'human score</text>')
    else:
        for i, name in enumerate(space.categories):
            x = left + _PLOT * (i + 0.5) / space.levels
            out.append(f'<text x="{x}" y="{top + _PLOT + 18}" text-anchor="middle">'
                       f'{_short(name)}</text>')
    out.append(f'<text x="14" y="{top + _PLOT / 2}" text-anchor="middle" '
               f'transform="rotate(-90 14 {top + _PLOT / 2})">judge score</text>')
    for row in rows:
        x, y = _point(report, row)
        color = "#1a7f37" if row.agrees else "#cf222e"
        out.append(f'<circle cx="{left + x * _PLOT:.1f}" cy="{top + (1 - y) * _PLOT:.1f}" '
                   f'r="4" fill="{color}" fill-opacity="0.6"><title>{escape(_text(row.input))}'
                   f'</title></circle>')
    out.append("</svg>")
    return "".join(out)


def _point(report: CalibrationReport, row: CalibrationRow) -> tuple[float, float]:
    """(x, y) in 0..1: x the human label, y the judge's goodness; items of one category are
    spread over its band by a small deterministic offset."""
    space = report.space
    if space.kind == "score":
        return row.human_value, row.goodness
    column = space.levels - 1 - int(row.human_value)
    offset = ((row.index * 37) % 100) / 100 - 0.5  # spread, not random: the page is stable
    return (column + 0.5 + 0.6 * offset) / space.levels, row.goodness


def _disagreements(report: CalibrationReport) -> str:
    rows = report.disagreements
    if not rows:
        return "<h2>Disagreements</h2><p>None: the judge agrees with every label.</p>"
    head = ("<tr><th>#</th><th>Input</th><th>Output</th><th>Human</th><th>Judge</th>"
            "<th>Score</th><th>Reason</th></tr>")
    body = "".join(
        f"<tr><td class=num>{r.index}</td><td>{escape(_text(r.input))}</td>"
        f"<td>{escape(_text(r.output))}</td><td>{escape(str(r.human_label))}</td>"
        f"<td>{escape(r.judge_label)}</td><td class=num>{r.score:g}</td>"
        f"<td>{escape(r.reason or '')}</td></tr>" for r in rows)
    return f"<h2>Disagreements, worst first ({len(rows)})</h2><table>{head}{body}</table>"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _short(name: str) -> str:
    return escape(name if len(name) <= 14 else name[:13] + "…")


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"
