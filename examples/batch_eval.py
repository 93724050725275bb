"""Batch evaluation: score an agent over a dataset with `run_evals` and gate on a threshold.

Every item becomes an `invoke_agent` span with its scores as events, exported like live traffic
(to $OTEL_EXPORTER_OTLP_ENDPOINT when set). Exits 1 when a mean score is under its threshold,
so the script can gate a CI job. Offline by default (deterministic judge); set
TRACESCORE_JUDGE_MODEL=openai/gpt-4o-mini (and its API key) to use a real judge.

    python examples/batch_eval.py                      # passes: means above 0.6 / 0.5
    python examples/batch_eval.py --min-relevancy 0.9  # fails the gate, exit code 1
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import Any

import tracescore

DATASET = [
    {"input": "How do I reset my password?",
     "ground_truth": "Open Settings, choose Security, then click Reset password.",
     "category": "account"},
    {"input": "Can I export my invoices as PDF?",
     "ground_truth": "Yes, open Billing and click Download PDF next to any invoice.",
     "category": "billing"},
    {"input": "Which plans include single sign-on?",
     "ground_truth": "Single sign-on is included in the Business and Enterprise plans.",
     "category": "plans"},
    {"input": "How do I delete my account?",
     "ground_truth": "Open Settings, choose Account, then click Delete account.",
     "category": "account"},
]

CANNED = {
    "password": "Open Settings, choose Security, then click Reset password.",
    "invoices": "Yes, go to Billing and click Download PDF next to an invoice.",
    "sign-on": "Single sign-on comes with the Business and Enterprise plans.",
    "delete": "Our office is closed on public holidays.",  # a bad answer, on purpose
}


def support_bot(question: str) -> str:
    """The agent under test (any sync or async callable taking the item's input)."""
    lowered = question.lower()
    return next((reply for key, reply in CANNED.items() if key in lowered), "I don't know.")


def print_item(item: Mapping[str, Any], output: Any, scores: dict[str, Any]) -> None:
    """Called as each item finishes (may also be async)."""
    shown = ", ".join(f"{sid}={result.score:.2f}" for sid, result in scores.items())
    print(f"- [{item['category']}] {item['input']}\n    {output}\n    {shown}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-relevancy", type=float, default=0.6)
    parser.add_argument("--min-similarity", type=float, default=0.5)
    args = parser.parse_args()
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    tracescore.configure(service_name="support-bot-eval", exporter="otlp" if endpoint else "none")
    judge = os.environ.get("TRACESCORE_JUDGE_MODEL", "tracescore/offline")
    scorers = [
        tracescore.create_answer_relevancy_scorer(model=judge),
        tracescore.create_content_similarity_scorer(),
    ]
    result = tracescore.run_evals(
        DATASET, scorers, support_bot,
        concurrency=4,
        thresholds={"answer-relevancy": args.min_relevancy,
                    "content-similarity": args.min_similarity},
        on_item_complete=print_item,
    )
    tracescore.flush()

    for scorer_id, mean in result.scores.items():
        print(f"{scorer_id}: mean {mean:.3f} (threshold {result.summary.thresholds[scorer_id]})")
    print(f"{result.summary.passed_items}/{result.summary.total_items} items passed; "
          f"verdict: {'PASS' if result.passed else 'FAIL'}")
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(main())
