"""Terminal output of the commands (rich tables and trees) and result files (JSON, CSV)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from tracescore import _semconv as sc
from tracescore._private_files import open_private, write_private

if TYPE_CHECKING:
    from tracescore.cli._otlp import FileSpan
    from tracescore.evals import EvalResult
    from tracescore.scoring import ScoreResult

_PREVIEW = 160


def short(value: Any, limit: int = _PREVIEW) -> str:
    """One-line preview of a value for a table cell."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def score_style(fraction: float | None) -> str:
    if fraction is None:
        return "red"
    return "green" if fraction >= 0.7 else "yellow" if fraction >= 0.3 else "red"


# --- `tracescore score` ------------------------------------------------------------------------


def score_table(result: ScoreResult) -> Table:
    """Every field of one score result, step prompts and results included."""
    table = Table(title=f"{result.scorer_name} ({result.scorer_id})", show_header=False,
                  expand=False)
    table.add_column("field", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    table.add_row("score", Text(f"{result.score:g}", style=score_style(result.score)))
    table.add_row("label", str(result.label))
    table.add_row("reason", escape(str(result.reason)))
    table.add_row("run id", result.run_id)
    steps = (
        ("preprocess prompt", result.preprocess_prompt),
        ("preprocess result", result.preprocess_step_result),
        ("analyze prompt", result.analyze_prompt),
        ("analyze result", result.analyze_step_result),
        ("reason prompt", result.generate_reason_prompt),
    )
    for name, value in steps:
        if value is not None:
            table.add_row(name, escape(value if isinstance(value, str)
                                       else json.dumps(value, ensure_ascii=False, indent=2,
                                                       default=str)))
    usage = result.usage
    if usage is not None and usage.calls:
        table.add_row("judge", f"{usage.model or '-'}: {usage.calls} call(s), "
                               f"{usage.input_tokens} in / {usage.output_tokens} out tokens, "
                               f"{usage.latency_ms:.0f} ms"
                      + (f", ${usage.cost_usd:.6f}" if usage.cost_usd is not None else ""))
    return table


# --- `tracescore eval` -------------------------------------------------------------------------


def eval_summary(result: EvalResult) -> Table:
    """Mean score per scorer, with the threshold and verdict when one was given."""
    summary = result.summary
    from tracescore._words import counted

    table = Table(title=f"Evaluation {result.name!r}: {counted(summary.total_items, 'item')}, "
                        f"{summary.passed_items} passed, {summary.failed_items} failed "
                        f"({summary.errored_items} with errors)")
    table.add_column("scorer")
    table.add_column("mean score", justify="right")
    table.add_column("scored items", justify="right")
    table.add_column("threshold", justify="right")
    table.add_column("verdict")
    for sid, mean in result.scores.items():
        scored = sum(1 for item in result.items if sid in item.scores)
        minimum = summary.thresholds.get(sid)
        verdict = summary.threshold_results.get(sid)
        table.add_row(
            sid,
            Text("-" if mean is None else f"{mean:.3f}", style=score_style(mean)),
            f"{scored}/{summary.total_items}",
            "-" if minimum is None else f">= {minimum:g}",
            "-" if verdict is None else Text("pass" if verdict else "FAIL",
                                              style="green" if verdict else "bold red"),
        )
    return table


def eval_items(result: EvalResult) -> Table:
    """One row per item: input, output and each score."""
    table = Table(title="Items", show_lines=False)
    table.add_column("#", justify="right")
    table.add_column("input", overflow="fold", ratio=2)
    table.add_column("output", overflow="fold", ratio=2)
    for sid in result.scores:
        table.add_column(sid, justify="right")
    for item in result.items:
        cells: list[Any] = [str(item.index), escape(short(item.input, 80)),
                            escape(short(item.output, 80)) if item.output is not None else "-"]
        for sid in result.scores:
            score = item.scores.get(sid)
            cells.append(Text("error", style="red") if score is None
                         else Text(f"{score.score:.3f}", style=score_style(score.score)))
        table.add_row(*cells)
    return table


def eval_failures(result: EvalResult) -> Table:
    table = Table(title="Failures", title_style="bold red")
    table.add_column("#", justify="right")
    table.add_column("step")
    table.add_column("scorer")
    table.add_column("error", overflow="fold")
    for failure in result.failures:
        table.add_row(str(failure.index), failure.step, failure.scorer_id or "-",
                      escape(f"{failure.error_type}: {short(failure.message, 300)}"))
    return table


def write_results(path: Path, result: EvalResult) -> None:
    """Write the full result as JSON, or one row per item as CSV (by the file's suffix)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".csv":
        _write_csv(path, result)
    else:
        write_private(path, json.dumps(result.to_dict(), ensure_ascii=False, indent=2) + "\n")


def _write_csv(path: Path, result: EvalResult) -> None:
    ids = list(result.scores)
    header = ["index", "input", "output", "ground_truth", "duration_ms", "trace_id"]
    for sid in ids:
        header += [f"{sid}.score", f"{sid}.label", f"{sid}.reason"]
    header.append("errors")
    with open_private(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        for item in result.items:
            row: list[Any] = [item.index, _cell(item.input), _cell(item.output),
                              _cell(item.ground_truth), f"{item.duration_ms:.1f}", item.trace_id]
            for sid in ids:
                score = item.scores.get(sid)
                row += ["", "", ""] if score is None else [score.score, score.label or "",
                                                           score.reason or ""]
            row.append("; ".join(f"{f.step}{'/' + f.scorer_id if f.scorer_id else ''}: "
                                 f"{f.error_type}: {f.message}" for f in item.failures))
            writer.writerow(row)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


# --- trace trees (`tracescore demo`) -----------------------------------------------------------


def trace_tree(root: FileSpan, children: dict[str | None, list[FileSpan]]) -> Tree:
    """A call's spans as a tree, each span with its score events (score, label, reason)."""
    label = _span_label(root)
    label.append(f"  trace {root.trace_id}", style="dim")
    tree = Tree(label)
    _add_details(tree, root)
    for child in children.get(root.span_id, []):
        _add_span(tree, child, children)
    return tree


def _add_span(parent: Tree, span: FileSpan, children: dict[str | None, list[FileSpan]]) -> None:
    node = parent.add(_span_label(span))
    _add_details(node, span)
    for child in children.get(span.span_id, []):
        _add_span(node, child, children)


def _span_label(span: FileSpan) -> Text:
    label = Text(span.name, style="bold")
    label.append(f"  {span.duration_ms:.1f} ms", style="dim")
    if span.status_code == "ERROR":
        label.append(f"  ERROR {span.status_message}", style="red")
    return label


def _add_details(node: Tree, span: FileSpan) -> None:
    attrs = span.attributes
    if attrs.get(sc.GEN_AI_OPERATION_NAME) == sc.OP_INVOKE_AGENT:
        question = _message_text(attrs.get(sc.GEN_AI_INPUT_MESSAGES))
        answer = _message_text(attrs.get(sc.GEN_AI_OUTPUT_MESSAGES))
        if question is not None:
            node.add(Text.assemble(("input:  ", "cyan"), short(question)))
        if answer is not None:
            node.add(Text.assemble(("output: ", "cyan"), short(answer)))
    for name, event in span.events:
        if name == sc.GEN_AI_EVALUATION_RESULT:
            node.add(_score_label(event))
        elif name == sc.TS_UNSCORED:
            node.add(Text(f"unscored by {event.get(sc.GEN_AI_EVALUATION_NAME)}: "
                          f"{event.get(sc.TS_UNSCORED_REASON)}", style="yellow"))


def demo_summary(roots: list[FileSpan], scorer_ids: list[str]) -> Table:
    """One row per agent call: question, answer and each score with its label."""
    table = Table(title="Scores per call")
    table.add_column("question", overflow="fold", ratio=1)
    table.add_column("answer", overflow="fold", ratio=1)
    for sid in scorer_ids:
        table.add_column(sid, justify="right", no_wrap=True)
    for root in roots:
        events = {e.get(sc.TS_SCORER_ID): e for name, e in root.events
                  if name == sc.GEN_AI_EVALUATION_RESULT}
        cells: list[Any] = [
            escape(short(_message_text(root.attributes.get(sc.GEN_AI_INPUT_MESSAGES)) or "", 60)),
            escape(short(_message_text(root.attributes.get(sc.GEN_AI_OUTPUT_MESSAGES)) or "", 60)),
        ]
        for sid in scorer_ids:
            event = events.get(sid)
            value = None if event is None else event.get(sc.GEN_AI_EVALUATION_SCORE_VALUE)
            if value is None:
                cells.append(Text("unscored" if event is None else "error", style="red"))
            else:
                label = event.get(sc.GEN_AI_EVALUATION_SCORE_LABEL, "")  # type: ignore[union-attr]
                cells.append(Text(f"{float(value):.2f} {label}", style=score_style(float(value))))
        table.add_row(*cells)
    return table


def _score_label(event: dict[str, Any]) -> Text:
    name = str(event.get(sc.GEN_AI_EVALUATION_NAME) or event.get(sc.TS_SCORER_ID))
    value = event.get(sc.GEN_AI_EVALUATION_SCORE_VALUE)
    text = Text("score ", style="magenta")
    text.append(f"{name}: ", style="bold")
    if value is None:
        text.append(f"error {event.get(sc.ERROR_TYPE, '')}", style="red")
    else:
        text.append(f"{float(value):.2f}", style=score_style(float(value)))
        text.append(f" ({event.get(sc.GEN_AI_EVALUATION_SCORE_LABEL, '-')})")
    explanation = event.get(sc.GEN_AI_EVALUATION_EXPLANATION)
    if explanation:
        text.append(f" — {short(explanation, 240)}", style="dim")
    return text


def _message_text(raw: Any) -> str | None:
    """Text of a semconv message list (JSON string); the raw value when it is something else."""
    if raw is None:
        return None
    try:
        messages = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        return str(raw)
    if isinstance(messages, list):
        texts = [str(part.get("content", "")) for m in messages if isinstance(m, dict)
                 for part in m.get("parts") or [] if isinstance(part, dict)]
        if texts:
            return " ".join(texts)
    return raw if isinstance(raw, str) else json.dumps(raw, default=str)


def console(*, stderr: bool = False) -> Console:
    """A console that never wraps words mid-way on narrow pipes (CI logs, subprocesses)."""
    return Console(stderr=stderr, highlight=False, soft_wrap=False)
