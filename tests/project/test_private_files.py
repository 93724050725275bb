"""Every file the product writes that holds span content is the owner's alone (0600), whatever the
umask and whether or not it was there before: the gateway's journal and its SQLite side files, the
OTLP JSON file exporter (`--spans-file`, `exporter="file"`), rescore's output, eval results,
calibration reports."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _gateway_helpers import agent_trace, sender

from tracescore._exporters import OTLPJsonFileExporter
from tracescore._private_files import open_private, write_private
from tracescore.gateway._journal import Journal
from tracescore.gateway._rescore import FileOutput

SECRET = "sk-live-0123456789abcdefghijklmnop"


def _journal(path: Path) -> list[Path]:
    journal = Journal(path)
    journal.add([(1, 2, SECRET.encode())])
    files = [p for p in path.parent.iterdir() if p.name.startswith(path.name)]
    assert len(files) > 1  # the database and its write-ahead log, while the journal is open
    for file in files:  # checked while open: the side files go at close
        assert stat.S_IMODE(file.stat().st_mode) == 0o600, file
    journal.close()
    return [path]


def _file_exporter(path: Path) -> list[Path]:
    with sender(OTLPJsonFileExporter(path)) as tracer:
        agent_trace(tracer)
    return [path]


def _rescore_output(path: Path) -> list[Path]:
    output = FileOutput(path)
    output.close()
    return [path]


def _text(path: Path) -> list[Path]:
    write_private(path, SECRET)
    return [path]


def _appended(path: Path) -> list[Path]:
    with open_private(path, "a") as handle:
        handle.write(SECRET)
    return [path]


WRITERS: dict[str, Callable[[Path], list[Path]]] = {
    "journal": _journal, "file exporter": _file_exporter, "rescore output": _rescore_output,
    "reports and results": _text, "appended": _appended}


@pytest.fixture(params=[0o022, 0o002, 0o000])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    before = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(before)


@pytest.mark.parametrize("existed", [False, True])
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_files_with_span_content_are_owner_only(writer: str, existed: bool, umask: int,
                                                tmp_path: Path) -> None:
    path = tmp_path / "out.db"
    if existed and writer != "journal":
        path.write_text("")
        path.chmod(0o644)
    written = WRITERS[writer](path)
    assert path in written
    for file in written:
        assert stat.S_IMODE(file.stat().st_mode) == 0o600, file
