"""JSON Lines: one JSON value per line, blank lines skipped, errors that name the line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def json_lines(text: str, where: object, *,
               error: type[Exception] = ValueError) -> Iterator[tuple[int, Any]]:
    """(line number, value) for each non-blank line of `text`, numbered from 1; a line that is
    not JSON raises `error`("<where>, line N: invalid JSON: ...")."""
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"{where}, line {number}: invalid JSON: {exc.msg}") from None
