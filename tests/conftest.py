import logging
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# The judge's calls traced (on by default) add a trace of `chat` spans per judged result; the
# suite's tests count the spans a backend receives without them. tests/test_judge_trace.py turns
# it on explicitly (OnlineScorer(trace_judge=True), `trace_judge: true` in a gateway config).
os.environ.setdefault("TRACESCORE_TRACE_JUDGE", "false")
# The fixtures (span_exporter, otlp_receiver, stub_llm) come from tracescore's pytest11 entry point.


class _DropLitellmWorkerNoise(logging.Filter):
    """litellm leaves its logging-worker task pending on every event loop the tests close; asyncio
    reports each one at interpreter exit, after pytest's summary. Only that report is dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not ("Task was destroyed but it is pending" in message
                    and "LoggingWorker" in message)


logging.getLogger("asyncio").addFilter(_DropLitellmWorkerNoise())
