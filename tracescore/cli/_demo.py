"""`tracescore demo`: the example agent, traced and scored online, then read back from the export.

Steps: import the demo agent (tracescore/cli/_demo_agent.py, part of the package so an installed
wheel can run it); configure() with both scorers and a file exporter (plus OTLP when an endpoint
is set, and the "phoenix" sink for answer relevancy when Phoenix's PHOENIX_ENDPOINT /
PHOENIX_COLLECTOR_ENDPOINT is: Phoenix's span table has room for one annotation per row, so the
row shows that score and content similarity stays in the span's events);
ask the questions with their ground truth; flush; read the OTLP JSON file back and print one trace
tree per call with its scores.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tracescore.cli._setup import build_scorers
from tracescore.scoring._judge_api import OFFLINE_MODEL

PHOENIX_ANNOTATION = "answer-relevancy"  # the demo's score shown in Phoenix's annotations column
OFFLINE_NOTE = (
    "The offline judge applies rules to words, with no language model: good for trying the "
    "pipeline, for tests and CI, and for catching off-topic or evasive answers. It does not "
    "understand meaning, and without a ground truth it cannot tell a wrong answer from a right "
    "one (relevant-or-not kappa 0.67 against people on tracescore's labelled set). Pass "
    "--judge-model for real verdicts."
)


def run_demo(*, spans_file: Path, model: str, endpoint: str | None) -> None:
    from rich.rule import Rule

    from tracescore.cli import _demo_agent as demo
    from tracescore.cli import _render as render
    from tracescore.cli._commands import export_to
    from tracescore.cli._otlp import children_of, read_spans
    from tracescore.instrument._calls import ground_truth

    out = render.console()
    scorers: list[Any] = list(build_scorers([], model))
    if _phoenix_configured():  # the headline score also as a Phoenix span annotation
        from tracescore.online import OnlineScorer

        scorers = [OnlineScorer(s, sinks=("span", "phoenix") if s.id == PHOENIX_ANNOTATION
                                else ("span",)) for s in scorers]
    spans_file.parent.mkdir(parents=True, exist_ok=True)
    spans_file.unlink(missing_ok=True)  # the file shows this run only
    handle = export_to(spans_file, endpoint, service_name="tracescore-demo", scorers=scorers)
    assert handle is not None

    out.print(Rule("tracescore demo"))
    out.print(f"Agent: trivia-agent ({_shown(Path(demo.__file__))})")
    out.print(f"Judge: {model}   scorers: {', '.join(_ids(scorers))}")
    if model == OFFLINE_MODEL:
        out.print(f"[dim]{OFFLINE_NOTE}[/]")
    out.print(f"Export: {spans_file}" + (f" and OTLP {endpoint}" if endpoint else ""))
    out.print()
    try:
        for number, item in enumerate(demo.QUESTIONS, start=1):
            with ground_truth(item.get("ground_truth")):
                reply = demo.answer(item["input"])
            out.print(f"[bold]{number}.[/] {render.escape(item['input'])}\n"
                      f"   [cyan]→[/] {render.escape(str(reply))}")
        out.print("\nWaiting for the online scores and the export …")
        flushed = handle.flush()
    finally:
        handle.shutdown()
    if not flushed:
        out.print("[yellow]The export did not finish in time; some spans may be missing.[/]")

    spans = read_spans(spans_file)
    tree = children_of(spans)
    roots = [s for s in tree.get(None, []) if s.name.startswith("invoke_agent")]
    out.print()
    from tracescore._words import counted

    out.print(Rule(f"Read back from {spans_file}: {counted(len(spans), 'span')}, "
                   f"{counted(sum(_score_count(s.events) for s in spans), 'score event')}"))
    for root in roots:
        out.print(render.trace_tree(root, tree))
        out.print()
    out.print(render.demo_summary(roots, _ids(scorers)))
    out.print("\nEvery span above was read back from the exported OTLP file; "
              "send the same traffic to a collector with OTEL_EXPORTER_OTLP_ENDPOINT.")


def _shown(path: Path) -> str:
    """`path` relative to the current directory when it is below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _score_count(events: list[tuple[str, dict[str, Any]]]) -> int:
    from tracescore import _semconv as sc

    return sum(1 for name, _ in events if name == sc.GEN_AI_EVALUATION_RESULT)


def _phoenix_configured() -> bool:
    from tracescore.online._phoenix_sink import ENV_COLLECTOR_ENDPOINT, ENV_ENDPOINT

    return bool(os.environ.get(ENV_ENDPOINT) or os.environ.get(ENV_COLLECTOR_ENDPOINT))


def _ids(scorers: list[Any]) -> list[str]:
    return [str(getattr(s, "scorer_id", None) or s.id) for s in scorers]
