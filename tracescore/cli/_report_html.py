"""`tracescore report` as one self-contained HTML page: inline CSS, SVG and a few lines of script
(an agent filter), no external file, and a Content-Security-Policy that lets the page load
nothing from anywhere. The style is the calibration report's."""

from __future__ import annotations

from datetime import datetime, timezone
from html import escape

from tracescore.calibration._html import STYLE
from tracescore.cli._report_data import HISTOGRAM_BINS, Bucket, Group, Report, Result

_CSP = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
        "img-src data:")
_EXTRA_STYLE = """
.band{fill:rgba(9,105,218,.18)}.rate{fill:none;stroke:#0969da;stroke-width:2}
.mean{fill:none;stroke:#8c959f;stroke-dasharray:4 3}.axis{stroke:#d0d7de}
.bar{fill:#0969da}.bar.failing{fill:#cf222e}.muted{color:#57606a}
section.group{border-top:1px solid #d0d7de;margin-top:1.5rem}code{font-size:.85em}
td.text{max-width:28rem;overflow-wrap:anywhere}
"""
_SCRIPT = """
document.getElementById('agent').addEventListener('change', function (e) {
  var wanted = e.target.value;
  document.querySelectorAll('[data-agent]').forEach(function (el) {
    el.hidden = wanted !== '' && el.getAttribute('data-agent') !== wanted;
  });
});
"""
_W, _H = 560, 200  # px of the time chart's plot area
_LEFT, _TOP = 44, 12
_HW, _HH = 300, 160  # px of the histogram's plot area


def html_page(report: Report) -> str:
    """The report as an HTML page."""
    agents = sorted({g.agent for g in report.groups})
    options = "".join(f"<option value=\"{escape(a)}\">{escape(a)}</option>" for a in agents)
    parts = [
        (f"<!doctype html><html lang=en><head><meta charset=utf-8>"
         f"<meta http-equiv=\"Content-Security-Policy\" content=\"{_CSP}\">"
         f"<title>tracescore quality report</title><style>{STYLE}{_EXTRA_STYLE}</style></head>"
         f"<body><h1>Quality report</h1>"),
        _header(report),
        (f"<p><label>Agent <select id=agent><option value=\"\">all agents</option>{options}"
         "</select></label></p>"),
        _overview(report),
        _corrected(report),
        _judge_models(report),
        *(_group_section(report, g) for g in report.groups),
        f"<script>{_SCRIPT}</script></body></html>",
    ]
    return "\n".join(p for p in parts if p)


def _header(report: Report) -> str:
    level = round(report.confidence * 100)
    span = (f"{_time(report.start_ns)} to {_time(report.end_ns)} UTC"
            if report.groups and report.end_ns else "no results")
    return (f"<p class=muted>From <code>{escape(report.source)}</code>: {report.spans} spans, "
            f"{sum(len(g.results) for g in report.groups)} results, {span}. A result passes "
            f"when its score (for scorers where higher is worse: 1 - score) reaches "
            f"{report.threshold:g}; intervals are {level}% Wilson intervals; time buckets of "
            f"{_duration(report.bucket_s)}.</p>")


def _overview(report: Report) -> str:
    if not report.groups:
        return "<p>No scorer results in these traces.</p>"
    level = round(report.confidence * 100)
    head = ("<tr><th>Agent</th><th>Scorer</th><th>Results</th><th>Pass rate "
            f"({level}% interval)</th><th>Failed runs</th><th>Unscored</th><th>Judge calls</th>"
            "<th>Judge cost</th><th>Versions</th></tr>")
    rows = "".join(
        f"<tr data-agent=\"{escape(g.agent)}\"><td>{escape(g.agent)}</td>"
        f"<td><a href=\"#{_anchor(g)}\">{escape(g.scorer)}</a></td>"
        f"<td class=num>{g.scored}</td><td class=num>{_rate(g.rate, g.low, g.high)}</td>"
        f"<td class=num>{g.failed}</td><td class=num>{sum(g.unscored.values())}</td>"
        f"<td class=num>{g.judge_calls}</td>"
        f"<td class=num>{_cost(g.cost_usd) if g.judge_calls else '-'}</td>"
        f"<td class=num>{len(g.versions)}</td></tr>" for g in report.groups)
    return f"<h2>Overview</h2><table class=overview>{head}{rows}</table>"


def _corrected(report: Report) -> str:
    notes = "".join(f"<li>{escape(n)}</li>" for n in report.label_notes)
    if not report.corrected and not notes:
        return ""
    level = round(report.confidence * 100)
    head = ("<tr><th>Scorer</th><th>Version</th><th>Judge only</th><th>Corrected by people's "
            "labels</th><th>Labelled</th><th>Judged</th></tr>")
    rows = "".join(
        f"<tr><td>{escape(c.scorer)}</td><td><code>{escape(c.version or '-')}</code></td>"
        f"<td class=\"num judge-only\">{_rate(e.judge_only.rate, e.judge_only.low, e.judge_only.high)}"
        f"</td><td class=\"num corrected\">"
        f"{_rate(e.corrected.rate, e.corrected.low, e.corrected.high)}</td>"
        f"<td class=num>{e.labelled}</td><td class=num>{e.judge_only.n}</td></tr>"
        for c in report.corrected for e in (c.estimate,))
    table = f"<table class=corrected-table>{head}{rows}</table>" if report.corrected else ""
    return (f"<h2>Pass rates corrected by people's labels</h2><p class=muted>The judge's pass "
            f"rate over every result of the scorer version, and the same corrected for the "
            f"judge's disagreement with people on the calls they labelled (prediction-powered "
            f"inference; {level}% intervals).</p>{table}"
            + (f"<ul>{notes}</ul>" if notes else ""))


def _judge_models(report: Report) -> str:
    if not report.judge_models:
        return ""
    rows = "".join(f"<tr><td><code>{escape(model)}</code></td><td class=num>{calls}</td>"
                   f"<td class=num>{_cost(cost)}</td></tr>"
                   for model, (calls, cost) in sorted(report.judge_models.items()))
    return ("<h2>Judge cost by model</h2><table><tr><th>Model</th><th>Calls</th><th>Cost</th>"
            f"</tr>{rows}</table>")


def _group_section(report: Report, group: Group) -> str:
    title = f"{group.agent} · {group.scorer}"
    direction = " (higher is worse)" if group.higher_is_worse else ""
    tokens_in, tokens_out = group.tokens
    summary = (f"<p>{group.scored} results, pass rate "
               f"{_rate(group.rate, group.low, group.high)}{direction}; {group.failed} failed "
               f"runs; judge: {group.judge_calls} calls, {tokens_in} input and {tokens_out} "
               f"output tokens, {_cost(group.cost_usd)}.</p>")
    figures = ("<div class=figs><figure><figcaption>Pass rate over time, with its interval "
               f"(dashed: mean score)</figcaption>{time_svg(report, group)}</figure><figure>"
               f"<figcaption>Score distribution</figcaption>{histogram_svg(group, report)}"
               "</figure></div>")
    return (f"<section class=group id=\"{_anchor(group)}\" data-agent=\"{escape(group.agent)}\""
            f" data-scorer=\"{escape(group.scorer)}\"><h2>{escape(title)}</h2>{summary}{figures}"
            f"{_worst(group)}{_versions(group)}{_unscored(group)}</section>")


def time_svg(report: Report, group: Group) -> str:
    """The pass rate per time bucket as a line over its Wilson band, the mean score dashed."""
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" class=timechart width="{_LEFT + _W + 16}" '
            f'height="{_TOP + _H + 36}" font-family="sans-serif" font-size="11">')]
    for tick in (0.0, 0.5, 1.0):
        level = _TOP + _H * (1 - tick)
        out.append(f'<line class=axis x1="{_LEFT}" x2="{_LEFT + _W}" y1="{level}" y2="{level}"/>'
                   f'<text x="{_LEFT - 6}" y="{level + 4}" text-anchor="end">{tick:g}</text>')
    buckets = group.buckets
    if not buckets:
        out.append(f'<text x="{_LEFT + _W / 2}" y="{_TOP + _H / 2}" text-anchor="middle">'
                   'no scored result</text></svg>')
        return "".join(out)
    start = report.start_ns
    stop = max(report.end_ns, start + report.bucket_s * 1_000_000_000)
    width = report.bucket_s * 1_000_000_000

    def x(b: Bucket) -> float:
        middle = min(b.start_ns + width / 2, stop) if len(buckets) > 1 else (start + stop) / 2
        return _LEFT + _W * (middle - start) / max(1, stop - start)

    def y(v: float) -> float:
        return _TOP + _H * (1 - v)

    upper = " ".join(f"{x(b):.1f},{y(b.high):.1f}" for b in buckets)
    lower = " ".join(f"{x(b):.1f},{y(b.low):.1f}" for b in reversed(buckets))
    if len(buckets) == 1:  # a band needs width: a bar around the one point
        b = buckets[0]
        out.append(f'<rect class=band x="{x(b) - 8:.1f}" y="{y(b.high):.1f}" width="16" '
                   f'height="{y(b.low) - y(b.high):.1f}"/>')
    else:
        out.append(f'<polygon class=band points="{upper} {lower}"/>')
    out.append('<polyline class=rate points="'
               + " ".join(f"{x(b):.1f},{y(b.rate):.1f}" for b in buckets) + '"/>')
    out.append('<polyline class=mean points="'
               + " ".join(f"{x(b):.1f},{y(b.mean):.1f}" for b in buckets) + '"/>')
    for b in buckets:
        out.append(f'<circle class=point cx="{x(b):.1f}" cy="{y(b.rate):.1f}" r="3.5" '
                   f'fill="#0969da"><title>{_time(b.start_ns)}: {b.passed} of {b.n} passed, '
                   f'{b.rate:.2f} ({b.low:.2f} to {b.high:.2f})</title></circle>')
    out.append(f'<text x="{_LEFT}" y="{_TOP + _H + 16}">{_time(start)}</text>'
               f'<text x="{_LEFT + _W}" y="{_TOP + _H + 16}" text-anchor="end">{_time(stop)}'
               f'</text><text x="{_LEFT + _W / 2}" y="{_TOP + _H + 30}" text-anchor="middle">'
               f'UTC, {_duration(report.bucket_s)} buckets</text></svg>')
    return "".join(out)


def histogram_svg(group: Group, report: Report) -> str:
    """How many results fell in each tenth of the score range (failing bins red)."""
    counts = group.histogram or [0] * HISTOGRAM_BINS
    largest = max(counts) or 1
    bar = _HW / len(counts)
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" class=histogram '
            f'width="{_LEFT + _HW + 16}" height="{_TOP + _HH + 36}" font-family="sans-serif" '
            'font-size="11">'),
           (f'<line class=axis x1="{_LEFT}" x2="{_LEFT + _HW}" y1="{_TOP + _HH}" '
            f'y2="{_TOP + _HH}"/>')]
    for i, count in enumerate(counts):
        low = i / len(counts)
        height = _HH * count / largest
        failing = " failing" if (low + 1 / len(counts)) <= report.threshold else ""
        score_low, score_high = _score_range(group, low, low + 1 / len(counts))
        out.append(f'<rect class="bar{failing}" x="{_LEFT + i * bar + 1:.1f}" '
                   f'y="{_TOP + _HH - height:.1f}" width="{bar - 2:.1f}" height="{height:.1f}">'
                   f'<title>{count} results with score {score_low:g} to {score_high:g}</title>'
                   '</rect>')
        if count:
            out.append(f'<text x="{_LEFT + (i + 0.5) * bar:.1f}" y="{_TOP + _HH - height - 3:.1f}"'
                       f' text-anchor="middle">{count}</text>')
    label = "1 - score" if group.higher_is_worse else "score"
    scale = f" / {group.scale:g}" if group.scale != 1 else ""
    out.append(f'<text x="{_LEFT}" y="{_TOP + _HH + 16}">0</text><text x="{_LEFT + _HW}" '
               f'y="{_TOP + _HH + 16}" text-anchor="end">1</text><text x="{_LEFT + _HW / 2}" '
               f'y="{_TOP + _HH + 30}" text-anchor="middle">{label}{scale} (left: worse)</text>'
               '</svg>')
    return "".join(out)


def _score_range(group: Group, low: float, high: float) -> tuple[float, float]:
    if group.higher_is_worse:
        low, high = 1 - high, 1 - low
    return round(low * group.scale, 3), round(high * group.scale, 3)


def _worst(group: Group) -> str:
    if not group.worst:
        return ""
    head = ("<tr><th>Score</th><th>Label</th><th>Time (UTC)</th><th>Trace id</th><th>Span id</th>"
            "<th>Question</th><th>Reason</th><th>Judge trace</th></tr>")
    body = "".join(_worst_row(r) for r in group.worst)
    return f"<h3>Worst calls</h3><table class=worst>{head}{body}</table>"


def _worst_row(r: Result) -> str:
    return (f"<tr><td class=num>{r.score:g}</td><td>{escape(r.label or '-')}</td>"
            f"<td>{_time(r.time_ns)}</td><td><code class=trace-id>{escape(r.trace_id)}</code></td>"
            f"<td><code>{escape(r.span_id)}</code></td>"
            f"<td class=text>{escape(_short(r.question or '-'))}</td>"
            f"<td class=text>{escape(_short(r.reason or '-'))}</td>"
            f"<td><code>{escape(r.judge_trace_id or '-')}</code></td></tr>")


def _versions(group: Group) -> str:
    rows = "".join(f"<tr><td><code>{escape(v.version)}</code></td><td class=num>{v.n}</td>"
                   f"<td>{_time(v.first_ns)}</td><td>{_time(v.last_ns)}</td></tr>"
                   for v in group.versions)
    return ("<h3>Scorer versions</h3><table class=versions><tr><th>Version</th><th>Results</th>"
            f"<th>First</th><th>Last</th></tr>{rows}</table>") if rows else ""


def _unscored(group: Group) -> str:
    failed: dict[str, int] = {}
    for r in group.results:
        if r.score is None:
            key = f"failed: {r.error}"
            failed[key] = failed.get(key, 0) + 1
    reasons = {**group.unscored, **failed}
    if not reasons:
        return "<h3>Unscored</h3><p>None: every sampled call got its score.</p>"
    rows = "".join(f"<tr><td>{escape(reason)}</td><td class=num>{count}</td></tr>"
                   for reason, count in sorted(reasons.items(), key=lambda kv: -kv[1]))
    return (f"<h3>Unscored</h3><table class=unscored><tr><th>Reason</th><th>Calls</th></tr>"
            f"{rows}</table>")


def _anchor(group: Group) -> str:
    return "g-" + "".join(c if c.isalnum() else "-" for c in f"{group.agent}-{group.scorer}")


def _rate(rate: float | None, low: float, high: float) -> str:
    return "-" if rate is None else f"{rate:.2f} ({low:.2f} to {high:.2f})"


def _cost(cost: float | None) -> str:
    return "unknown" if cost is None else f"${cost:.4f}"


def _time(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _duration(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"
