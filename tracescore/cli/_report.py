"""`tracescore report`: a self-contained HTML page of scored traffic, read from OTLP JSON archives
(the Collector's file exporter, `tracescore demo --spans-file`, `tracescore rescore -o`) or from
Phoenix."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

from tracescore._private_files import write_private

_PHOENIX = "phoenix:"  # --labels SCORER=phoenix:ANNOTATION


class _UsageError(click.ClickException):
    """Bad input: message on stderr, exit code 2."""

    exit_code = 2


@click.command("report")
@click.argument("inputs", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", "-o", "out", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("tracescore-report.html"), show_default=True,
              help="The HTML page written.")
@click.option("--phoenix", "phoenix_url", metavar="URL",
              help="Read the spans from this Phoenix (REST API) instead of INPUTS.")
@click.option("--project", default="default", show_default=True, help="With --phoenix: project.")
@click.option("--threshold", type=click.FloatRange(0, 1), default=0.5, show_default=True,
              help="Score (as a fraction of the scale) from which a result passes.")
@click.option("--confidence", type=click.FloatRange(0, 1, min_open=True, max_open=True),
              default=0.95, show_default=True, help="Confidence level of the intervals.")
@click.option("--higher-is-worse", "higher_is_worse", multiple=True, metavar="SCORER",
              help="A scorer whose higher scores are worse (repeatable; hallucination, "
                   "toxicity and bias are already).")
@click.option("--since", type=click.DateTime(), help="Only calls that ended at or after this "
              "time (UTC).")
@click.option("--until", type=click.DateTime(), help="Only calls that ended before this time "
              "(UTC).")
@click.option("--worst", type=click.IntRange(min=0), default=5, show_default=True,
              help="Worst calls listed per agent and scorer.")
@click.option("--labels", "label_files", multiple=True, metavar="SCORER=FILE",
              help="People's labels of calls the scorer judged (.csv, .jsonl or .json with "
                   "trace_id, span_id and a label, as `tracescore sample` writes them; with "
                   "--phoenix also phoenix:ANNOTATION, the human annotations of that name): "
                   "adds the pass rate corrected by them (repeatable).")
@click.option("--label-column", default="label", show_default=True,
              help="The column (key) holding the human label.")
@click.option("--rectifiers", "rectifiers_out", type=click.Path(dir_okay=False, path_type=Path),
              help="With --labels: also write the rectifier of each labelled scorer version "
                   "(JSON), for the gateway's `rectifiers:` and OnlineScorer(rectifiers=...), "
                   "which export it for Prometheus's corrected pass rate.")
def report_command(inputs: Sequence[Path], out: Path, phoenix_url: str | None, project: str,
                   threshold: float, confidence: float, higher_is_worse: Sequence[str],
                   since: datetime | None, until: datetime | None, worst: int,
                   label_files: Sequence[str], label_column: str,
                   rectifiers_out: Path | None) -> None:
    """Write an HTML report of the scores in INPUTS (OTLP JSON lines) or in Phoenix.

    \b
    Per agent and scorer: the pass rate over time with its Wilson interval, the score
    distribution, the worst calls with their trace ids, the judge's calls and cost, why calls
    went unscored, and the scorer versions. With --labels, the pass rate corrected by people's
    labels beside the judge-only one. The page loads nothing from the network.
    \b
    Exit codes: 0 written; 2 bad input (a bad line, no spans, an unreadable labels file).
    Example:
      tracescore report traces.jsonl -o quality.html --labels answer-relevancy=labels.csv
    """
    from tracescore._exceptions import ConfigurationError
    from tracescore.cli._report_data import build_report
    from tracescore.cli._report_html import html_page

    if bool(inputs) == (phoenix_url is not None):
        raise _UsageError("give INPUTS or --phoenix URL (not both)")
    if rectifiers_out is not None and not label_files:
        raise _UsageError("--rectifiers needs --labels (the rectifiers come from people's labels)")
    try:
        labels = _labels(label_files, phoenix_url, project)
        if phoenix_url is not None:
            from tracescore.cli._phoenix_labels import read_phoenix_spans

            spans = read_phoenix_spans(phoenix_url, project)
            source = f"{phoenix_url.rstrip('/')} project {project}"
        else:
            spans = [span for path in inputs for span in _spans(path)]
            source = ", ".join(str(p) for p in inputs)
        if not spans:
            raise ConfigurationError(f"no spans in {source}")
        report = build_report(spans, source=source, threshold=threshold, confidence=confidence,
                              higher_is_worse=higher_is_worse, worst=worst,
                              labels=labels, label_column=label_column,
                              since_ns=_ns(since), until_ns=_ns(until))
        if rectifiers_out is not None:
            _write_rectifiers(rectifiers_out, report, labels, label_column)
    except ConfigurationError as exc:
        raise _UsageError(str(exc)) from None
    write_private(out, html_page(report))
    results = sum(len(g.results) for g in report.groups)
    click.echo(f"{results} results of {len({g.agent for g in report.groups})} agents and "
               f"{len({g.scorer for g in report.groups})} scorers from {len(spans)} spans; "
               f"report written to {out}")
    for note in report.label_notes:
        click.echo(f"warning: {note}", err=True)


def _write_rectifiers(path: Path, report: Any, labels: dict[str, list[dict[str, Any]]],
                      label_column: str) -> None:
    from tracescore._exceptions import ConfigurationError
    from tracescore.calibration import write_rectifiers
    from tracescore.cli._report_rectifiers import report_rectifiers

    rectifiers, notes = report_rectifiers(report, labels, label_column)
    if not rectifiers:
        raise ConfigurationError("--rectifiers: no scorer version has 2 labelled calls among "
                                 f"the results{': ' + '; '.join(notes) if notes else ''}")
    write_rectifiers(path, rectifiers)
    report.label_notes.extend(notes)
    click.echo(f"{len(rectifiers)} rectifiers written to {path}")


def _labels(specs: Sequence[str], phoenix_url: str | None, project: str
            ) -> dict[str, list[dict[str, Any]]]:
    """Labelled items by scorer id: from files, or (`phoenix:NAME`) the human annotations
    named NAME in the Phoenix the spans come from."""
    from tracescore._exceptions import ConfigurationError

    labels: dict[str, list[dict[str, Any]]] = {}
    for spec in specs:
        scorer, sep, path = (part.strip() for part in spec.partition("="))
        if not sep or not scorer or not path:
            raise ConfigurationError(f"--labels {spec!r}: write it as SCORER=FILE or "
                                     "SCORER=phoenix:ANNOTATION")
        if path.startswith(_PHOENIX):
            if phoenix_url is None:
                raise ConfigurationError(f"--labels {spec!r}: Phoenix annotations need --phoenix")
            from tracescore.cli._phoenix_labels import read_phoenix_labels

            items = read_phoenix_labels(phoenix_url, project, path.removeprefix(_PHOENIX))
        else:
            items = _label_rows(Path(path))
        labels.setdefault(_scorer_id(scorer), []).extend(items)
    return labels


def _label_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a labelling file (.csv, .jsonl or .json: a list of objects)."""
    import csv
    import io
    import json

    from tracescore._exceptions import ConfigurationError
    from tracescore._jsonl import json_lines

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"--labels {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigurationError(f"--labels {path}: not UTF-8 text") from None
    suffix = path.suffix.lower()
    if suffix == ".csv":
        rows: Any = list(csv.DictReader(io.StringIO(text, newline="")))
    elif suffix == ".jsonl":
        rows = [row for _, row in json_lines(text, path, error=ConfigurationError)]
    elif suffix == ".json":
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigurationError(f"--labels {path}: invalid JSON: {exc.msg}") from None
    else:
        raise ConfigurationError(f"--labels {path}: expected a .csv, .jsonl or .json file")
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise ConfigurationError(f"--labels {path}: expected rows of trace_id, span_id, label")
    return rows


def _ns(moment: datetime | None) -> int | None:
    """A naive date and time of the command line, read as UTC, in nanoseconds."""
    if moment is None:
        return None
    return int(moment.replace(tzinfo=moment.tzinfo or timezone.utc).timestamp() * 1e9)


def _scorer_id(name: str) -> str:
    from tracescore._exceptions import ConfigurationError
    from tracescore.scoring._registry import scorer_id

    try:
        return scorer_id(name)
    except ConfigurationError:
        return name  # an LLM judge's own name


def _spans(path: Path) -> list[Any]:
    from tracescore._exceptions import ConfigurationError
    from tracescore.cli._otlp import read_spans

    try:
        return read_spans(path)
    except ValueError as exc:
        raise ConfigurationError(f"{path}: {exc}") from None
