"""A pending score reaches every sink when the app stops without `flush()`: `shutdown()`, the end
of the script (atexit) and SIGTERM all wait for it (bounded), whichever sinks the scorer uses."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from test_online import Harness, LengthScorer

from tracescore import OnlineScorer
from tracescore import _semconv as sc
from tracescore.online import _options, _sinks
from tracescore.online._records import ScoreRecord

SINKS = ["span", "carrier", "log", "recorded"]


class RecordingSink:
    """A result sink (as Phoenix's) that keeps what it is given."""

    def __init__(self) -> None:
        self.records: list[ScoreRecord] = []

    def emit(self, record: ScoreRecord) -> None:
        self.records.append(record)

    def force_flush(self, timeout_s: float = 30.0) -> bool:
        return True

    def shutdown(self, timeout_s: float = 30.0) -> None:
        return None

    def stats(self) -> dict[str, int]:
        return {"emitted": len(self.records)}


@pytest.mark.parametrize("sink", SINKS)
def test_shutdown_without_flush_delivers_a_pending_score_to_each_sink(
        sink: str, monkeypatch: pytest.MonkeyPatch) -> None:
    recording = RecordingSink()
    monkeypatch.setitem(_sinks.RESULT_SINKS, "recorded", lambda: recording)
    monkeypatch.setattr(_options, "SINKS", (*_options.SINKS, "recorded"))
    logs = InMemoryLogRecordExporter()
    loggers = LoggerProvider()
    loggers.add_log_record_processor(SimpleLogRecordProcessor(logs))
    gate = threading.Event()
    harness = Harness([_online(LengthScorer(gate=gate), sink)], logger_provider=loggers)
    harness.call("hello world")
    threading.Timer(0.3, gate.set).start()  # still scoring when shutdown starts
    harness.close()
    delivered: dict[str, int] = {
        "span": sum(1 for s in harness.agent_spans()
                    for e in s.events if e.name == sc.GEN_AI_EVALUATION_RESULT),
        "carrier": sum(1 for s in harness.spans() if s.name.startswith("evaluation ")),
        "log": sum(1 for r in logs.get_finished_logs()
                   if r.log_record.event_name == sc.GEN_AI_EVALUATION_RESULT),
        "recorded": len(recording.records),
    }
    assert delivered == {name: int(name == sink) for name in SINKS}
    stats = harness.processor.stats()
    assert (stats["scored"], stats["dropped"]) == (1, 0)


def _online(scorer: Any, sink: str) -> OnlineScorer:
    return OnlineScorer(scorer, sinks=(sink,))


_APP = textwrap.dedent("""
    import sys, time
    import tracescore
    from tracescore import OnlineScorer
    from tracescore.scoring import create_content_similarity_scorer

    sink, path, how = sys.argv[1], sys.argv[2], sys.argv[3]
    tracescore.configure(exporter="file", file_path=path, online={"isolation": "thread"},
                         scorers=[OnlineScorer(create_content_similarity_scorer(),
                                               sinks=(sink,))])

    @tracescore.agent(name="geo")
    def geo(question: str) -> str:
        return "Paris is the capital of France."

    geo("What is the capital of France?")
    if how == "sigterm":
        print("called", flush=True)
        time.sleep(60)
""")


@pytest.mark.parametrize("how", ["atexit", "sigterm"])
@pytest.mark.parametrize("sink", ["span", "carrier"])
def test_the_script_ending_delivers_a_pending_score(sink: str, how: str, tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", _APP, sink, str(path), how],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if how == "sigterm":
        assert proc.stdout is not None and proc.stdout.readline().strip() == "called"
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert path.exists(), err
    assert path.read_text().count(sc.GEN_AI_EVALUATION_RESULT) >= 1, err
