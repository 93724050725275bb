"""Agent spans OpenInference writes that tracescore cannot read: made by the real library.

Runs in the conventions side venv (`rigs.conventions.conventions_venv()`), where
tracescore is not installed; it reuses the JSON-lines exporter of `rigs/agents/convention_agent.py`:

    python _unreadable_agent.py KIND CASES.json OUT.jsonl

KIND "own_key": an AGENT span (`OITracer.start_as_current_span(..., openinference_span_kind=
"agent")`) whose code records the question as its input but the answer under its own attribute
`geo.response` (no `output.value`), with a TOOL span below it. KIND "no_content": an AGENT span
that records neither (as the OpenAI Agents SDK's are), the answer only on a TOOL span below it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ANSWER_KEY = "geo.response"


def main(kind: str, cases_file: str, out: str) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent / "rigs" / "agents"))
    from convention_agent import AGENT_NAME, _provider
    from openinference.instrumentation import OITracer, TraceConfig

    provider = _provider(out)
    tracer = OITracer(provider.get_tracer("unreadable.openinference"), config=TraceConfig())
    with open(cases_file, encoding="utf-8") as handle:
        cases = json.load(handle)
    for case in cases:
        @tracer.tool
        def lookup(city: str) -> str:
            return str(case["answer"])  # noqa: B023 - called in this iteration only

        with tracer.start_as_current_span(AGENT_NAME, openinference_span_kind="agent") as span:
            answer = lookup(case["question"])
            if kind == "own_key":
                span.set_input(case["question"])
                span.set_attribute(ANSWER_KEY, answer)
    provider.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
