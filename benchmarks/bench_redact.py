"""Redaction cost on typical captured payloads: `serialize` with built-in redaction on vs off.

Payloads: a short question, a chat history, tool arguments with nested config (one secret
key), an 8 KB document, an error message with a URL password. Each payload is serialized
with `redact=True` and `redact=False`, interleaved in one run (median of the rounds, thread
CPU time); the ratio column is on/off. `--baseline REV` adds the serializer as it was at git
revision REV ("on@REV"), measured in the same rounds, for before/after figures from one run.

    python benchmarks/bench_redact.py [--quick] [--json PATH] [--baseline REV]
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment, interleaved, print_table, write_json

from tracescore._config import ContentSettings
from tracescore._content import serialize

ROOT = Path(__file__).resolve().parent.parent
_PROSE = ("The customer asked about the refund for order 5521 and the shipping status. "
          "Our policy allows returns within thirty days; the key point is the receipt. ")


def payloads() -> dict[str, Any]:
    history = [{"role": "system", "content": "You are a helpful support agent. Be brief."}]
    for turn in range(4):
        history.append({"role": "user", "content": f"Question {turn}: " + _PROSE})
        history.append({"role": "assistant", "content": "Answer: " + _PROSE[:120]})
    return {
        "question (60 chars)": "What is the capital of France, and when was it founded?",
        "chat history (9 msgs)": history,
        "tool args (nested)": {
            "query": "refund status", "limit": 10, "filters": {"region": "eu", "tags": ["a", "b"]},
            "config": {"api_key": "abcd-efgh-ijkl", "timeout": 30, "retries": 3,
                       "endpoint": "https://api.example.com/v1", "max_tokens": 256},
        },
        "document (8 KB)": (_PROSE * 60)[:8000] + " contact ops@example.com",
        "error text": ("could not reach postgres://app:S3cret@db:5432/orders after 3 retries "
                       "(timeout 30 s); last error: connection refused"),
    }


def _serializer_at(rev: str) -> Callable[[object, ContentSettings], str]:
    """`serialize` from `tracescore/_content.py` at git revision `rev`, loaded on its own."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:tracescore/_content.py"],
                            check=True, capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "_content_baseline.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("_content_baseline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    serializer: Callable[[object, ContentSettings], str] = module.serialize
    return serializer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and calls")
    parser.add_argument("--json", help="write the results to this file")
    parser.add_argument("--baseline", help="also time the serializer at this git revision")
    args = parser.parse_args()
    rounds, n = (3, 300) if args.quick else (9, 2000)
    on, off = ContentSettings(redact=True), ContentSettings(redact=False)
    baseline = _serializer_at(args.baseline) if args.baseline else None

    results: dict[str, dict[str, float]] = {}
    rows = []
    for name, payload in payloads().items():
        cases: dict[str, Callable[[], Any]] = {
            "off": functools.partial(serialize, payload, off),
            "on": functools.partial(serialize, payload, on),
        }
        if baseline is not None:
            cases["on@base"] = functools.partial(baseline, payload, on)
        medians = interleaved(cases, rounds=rounds, n=n, clock="cpu")
        results[name] = {**medians, "on/off": medians["on"] / medians["off"]}
        row = [name, medians["off"] / 1000, medians["on"] / 1000, medians["on"] / medians["off"]]
        if baseline is not None:
            results[name]["on/on@base"] = medians["on"] / medians["on@base"]
            row += [medians["on@base"] / 1000, medians["on"] / medians["on@base"]]
        rows.append(row)
    headers = ["payload", "off µs", "on µs", "on/off"]
    if baseline is not None:
        headers += [f"on@{args.baseline} µs", f"on/on@{args.baseline}"]
    print_table(rows, headers, title="serialize() per payload, redaction on vs off (CPU time)")
    write_json(args.json, {"environment": environment(), "baseline": args.baseline,
                           "results": results})


if __name__ == "__main__":
    main()
