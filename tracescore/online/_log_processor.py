"""`ScoringLogRecordProcessor`: GenAI content log records, joined to the agent spans a
`ScoringSpanProcessor` reads (for instrumentations that write prompts and answers as logs).

    processor = ScoringSpanProcessor(BatchSpanProcessor(OTLPSpanExporter()), scorers=[...],
                                     score_genai_spans=True)
    tracer_provider.add_span_processor(processor)
    logger_provider.add_log_record_processor(ScoringLogRecordProcessor(processor))
"""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry.sdk._logs import LogRecordProcessor

from tracescore._guard import Guard
from tracescore.online._processor import ScoringSpanProcessor

_log = logging.getLogger("tracescore.online")


class ScoringLogRecordProcessor(LogRecordProcessor):
    """Keeps the GenAI content events among the records emitted (`gen_ai.user.message`,
    `gen_ai.choice`, `gen_ai.client.inference.operation.details`, ...: by their trace and span
    id, bounded) for `span_processor`, which reads them with the span's own events when the span
    ends. Exports nothing and changes no record: add it beside the processor that exports."""

    def __init__(self, span_processor: ScoringSpanProcessor) -> None:
        self._content = span_processor.log_content
        self._guard = Guard(_log)

    def on_emit(self, log_record: Any) -> None:
        try:
            self._content.add_sdk(log_record)
        except Exception:  # noqa: BLE001 - never into the code that logged
            self._guard.once("emit", "tracescore: could not read a log record's content",
                             exc_info=True)

    emit = on_emit  # the name before opentelemetry-sdk 1.35

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True
