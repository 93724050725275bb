"""Agent-span recognition: spans/s per convention, and what a span that is no agent call costs.

The spans are the ones the real libraries export (OpenTelemetry's GenAI util, OpenInference,
traceloop-sdk, pydantic-ai, the Vercel AI SDK under node; `tests/rigs/conventions.py`, its
side venv and npm folder created on first use),
decoded from OTLP JSON to attribute dicts as the gateway sees them. Timed interleaved in one
run, through the whole built-in chain in its order (genai, openinference, traceloop,
pydantic_ai), so a later convention also pays for the earlier ones' rejections:
  * recognise <convention>: the agent span, read into a RecognisedCall;
  * reject <convention> <span>: that library's other spans (tool, task, model request);
  * reject plain HTTP span: a server span with typical HTTP attributes (the common case);
  * markers pre-check: `markers.isdisjoint(attributes)`, the test a caller such as the gateway
    can make before running the chain at all.

    python benchmarks/bench_recognise.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]  # _common; the suite's rigs
from _common import environment, interleaved, print_table, write_json
from rigs.conventions import CONVENTIONS, convention_spans

from tracescore.online.intake import build_recognisers, recognise, recogniser_markers

QUESTION = "What is the capital of France, and how many people live there?"
ANSWER = "Paris is the capital of France; about 2.1 million people live in the city proper."
HTTP_SPAN = ("GET /orders/{id}", {
    "http.request.method": "GET", "http.route": "/orders/{id}", "url.path": "/orders/42",
    "url.scheme": "https", "server.address": "shop.example", "server.port": 443,
    "http.response.status_code": 200, "network.protocol.version": "1.1",
    "user_agent.original": "curl/8.5.0", "client.address": "10.1.2.3",
})


def _cases() -> tuple[dict[str, Callable[[], Any]], dict[str, str]]:
    chain = build_recognisers()
    markers = recogniser_markers(chain)
    cases: dict[str, Callable[[], Any]] = {}
    kinds: dict[str, str] = {}
    for convention in CONVENTIONS:
        spans = convention_spans(convention, [
            {"question": QUESTION, "answer": ANSWER, "ground_truth": "Paris"}])
        for span in spans:
            name, attributes = span.name, dict(span.attributes)
            call = recognise(name, attributes, chain)
            label = (f"recognise {convention} ({call.agent})" if call is not None
                     else f"reject {convention} '{name}'")
            if label in cases:
                continue
            cases[label] = functools.partial(recognise, name, attributes, chain)
            kinds[label] = "agent" if call is not None else "other"
    name, attributes = HTTP_SPAN
    assert recognise(name, attributes, chain) is None
    cases["reject plain HTTP span"] = lambda: recognise(name, attributes, chain)
    kinds["reject plain HTTP span"] = "other"
    cases["markers pre-check (HTTP span)"] = lambda: markers.isdisjoint(attributes)
    kinds["markers pre-check (HTTP span)"] = "pre-check"
    return cases, kinds


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and calls")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    rounds, n = (5, 5_000) if args.quick else (9, 20_000)
    cases, kinds = _cases()
    medians = interleaved(cases, rounds=rounds, n=n)
    rows = []
    figures: dict[str, Any] = {}
    for label, ns in medians.items():
        rows.append([label, kinds[label], ns, 1e9 / ns])
        figures[label] = {"kind": kinds[label], "ns_per_span": ns, "spans_per_s": 1e9 / ns}
    print_table(rows, ["span", "kind", "ns/span", "spans/s"],
                title=f"Recognition through the built-in chain ({rounds} rounds x {n:,} spans)")
    agents = [f for f in figures.values() if f["kind"] == "agent"]
    others = [f for f in figures.values() if f["kind"] == "other"]
    result = {
        "environment": environment(),
        "rounds": rounds,
        "n": n,
        "cases": figures,
        "slowest_agent_spans_per_s": min(f["spans_per_s"] for f in agents),
        "slowest_reject_ns": max(f["ns_per_span"] for f in others),
    }
    write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
