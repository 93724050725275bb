"""Dataset files (`tracescore eval`, the gateway's references): JSON Lines, JSON and CSV, with
errors that name the line."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from tracescore._exceptions import ConfigurationError, DatasetError
from tracescore._jsonl import json_lines
from tracescore.scoring._trace_data import (
    CONTEXT_KEY,
    EXPECTED_TRAJECTORY_KEY,
    TOOL_CALLS_KEY,
    TRAJECTORY_KEY,
    TURNS_KEY,
    item_scope,
    item_trace,
)

_JSONL_SUFFIXES = {".jsonl", ".ndjson"}
_LIST_KEYS = ("items", "data", "examples")


def load_dataset(path: str | Path) -> list[dict[str, Any]]:
    """Read evaluation items (`{"input": ..., "ground_truth": ...}` plus metadata) from `path`.

    The format follows the suffix: `.jsonl`/`.ndjson` (one object per line, blank lines
    skipped), `.json` (a list of objects, or an object holding one under "items"/"data"/
    "examples"), `.csv` (a header row with an `input` column; `ground_truth` optional).
    Items may give `tool_calls` and `context`, `trajectory` and `expected_trajectory` (in
    CSV, JSON in the cell); a multi-turn item gives `turns` (a list) instead of `input`.
    """
    file = Path(path)
    if not file.is_file():
        raise DatasetError(f"{file}: no such file")
    suffix = file.suffix.lower()
    try:
        text = file.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{file}: cannot read: {exc}") from None
    if suffix in _JSONL_SUFFIXES:
        items = _jsonl(file, text)
    elif suffix == ".json":
        items = _json(file, text)
    elif suffix == ".csv":
        items = _csv(file, text)
    else:
        raise DatasetError(f"{file}: unknown dataset format {suffix or '(no suffix)'!r}; "
                           "use .jsonl, .json or .csv")
    if not items:
        raise DatasetError(f"{file}: the dataset has no items")
    return items


def _jsonl(file: Path, text: str) -> list[dict[str, Any]]:
    return [_check(row, f"{file}, line {number}")
            for number, row in json_lines(text, file, error=DatasetError)]


def _json(file: Path, text: str) -> list[dict[str, Any]]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{file}, line {exc.lineno}: invalid JSON: {exc.msg}") from None
    if isinstance(doc, dict):
        rows = next((doc[k] for k in _LIST_KEYS if isinstance(doc.get(k), list)), None)
        if rows is None:
            raise DatasetError(f"{file}: expected a list of items, or an object with one of "
                               f"{', '.join(repr(k) for k in _LIST_KEYS)}")
    elif isinstance(doc, list):
        rows = doc
    else:
        raise DatasetError(f"{file}: expected a list of items, got {type(doc).__name__}")
    return [_check(row, f"{file}, item {i}") for i, row in enumerate(rows)]


def _csv(file: Path, text: str) -> list[dict[str, Any]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    if not reader.fieldnames or "input" not in reader.fieldnames:
        raise DatasetError(f"{file}, line 1: the header needs an 'input' column "
                           f"(found: {', '.join(reader.fieldnames or []) or 'nothing'})")
    items = []
    for row in reader:
        where = f"{file}, line {reader.line_num}"
        if None in row:  # more cells than header columns
            raise DatasetError(f"{where}: more values than header columns")
        clean = {k: v for k, v in row.items() if v is not None}
        if "ground_truth" in clean and clean["ground_truth"] == "":
            clean["ground_truth"] = None
        for key in (TOOL_CALLS_KEY, CONTEXT_KEY, TRAJECTORY_KEY, EXPECTED_TRAJECTORY_KEY):
            cell = clean.get(key)
            if cell == "":
                del clean[key]
            elif cell is not None:
                try:
                    clean[key] = json.loads(cell)
                except json.JSONDecodeError as exc:
                    shape = "a JSON array" if key in (TOOL_CALLS_KEY, CONTEXT_KEY) else "JSON"
                    raise DatasetError(f"{where}: {key!r} must be {shape}: {exc.msg}"
                                       ) from None
        items.append(_check(clean, where))
    return items


def _check(row: Any, where: str) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: expected an object, got {type(row).__name__}")
    if "input" not in row and TURNS_KEY not in row:
        raise DatasetError(f"{where}: missing the 'input' key (or 'turns', for a multi-turn "
                           f"item)")
    if "input" in row and (row["input"] is None or row["input"] == ""):
        raise DatasetError(f"{where}: 'input' is empty")
    try:
        item_trace(row, where)
        item_scope(row, where)
    except ConfigurationError as exc:
        raise DatasetError(str(exc)) from None
    return row
