"""Runs per second of judged scorers with the offline judge (no network), side by side.

    python benchmarks/bench_offline_judges.py [--quick] [--json PATH]

The baseline is answer relevancy with the offline judge (word overlap). Toxicity's offline judge
runs a trained classifier (alt-profanity-check, the `toxicity` extra) on every sentence; judged
tool-call accuracy's compares words of the request with each tool's name and description. Every
scorer gets the same generated answers (3 sentences, one in four with an insult) in interleaved
rounds; the table gives the best round of each.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import environment, interleaved, print_table, write_json

from tracescore import ToolCall
from tracescore.scoring import (
    Scorer,
    create_answer_relevancy_scorer,
    create_tool_call_accuracy_scorer_llm,
    create_toxicity_scorer,
)

OFFLINE = "tracescore/offline"
QUESTION = "What's the weather in Oslo this weekend?"
TOOLS = [{"id": "get_weather", "description": "Current weather and forecast for a city"},
         {"id": "get_news", "description": "Latest headlines for a topic"},
         {"id": "book_hotel", "description": "Book a hotel room in a city"}]
_SENTENCES = ("Oslo will be cold this weekend.", "Expect rain on Saturday afternoon.",
              "Sunday looks clear with light wind.", "Temperatures stay near 3 degrees.",
              "Pack a warm coat and an umbrella.", "The fjord is lovely in winter.")
_INSULTS = ("Only an idiot would go out in that.", "Stop asking, moron.")

SCORERS: dict[str, Callable[[], Scorer]] = {
    "answer-relevancy (baseline)": lambda: create_answer_relevancy_scorer(model=OFFLINE),
    "toxicity": lambda: create_toxicity_scorer(model=OFFLINE),
    "llm-tool-call-accuracy": lambda: create_tool_call_accuracy_scorer_llm(
        model=OFFLINE, available_tools=TOOLS),
}


def make_answers(count: int, seed: int = 16) -> list[str]:
    rng = random.Random(seed)
    answers = []
    for _ in range(count):
        sentences = rng.sample(_SENTENCES, 3)
        if rng.random() < 0.25:
            sentences[rng.randrange(3)] = rng.choice(_INSULTS)
        answers.append(" ".join(sentences))
    return answers


def _case(scorer: Scorer, answers: list[str]) -> Callable[[], None]:
    calls = [ToolCall(name="get_weather"), ToolCall(name="get_news")]

    def run() -> None:
        for answer in answers:
            scorer.run(input=QUESTION, output=answer, run_id="bench", tool_calls=calls)

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    args = parser.parse_args(argv)
    rounds, batch, n = (3, 20, 2) if args.quick else (9, 50, 4)
    answers = make_answers(batch)
    scorers = {name: make() for name, make in SCORERS.items()}
    for scorer in scorers.values():  # warm up: the first toxicity run loads the classifier
        scorer.run(input=QUESTION, output=answers[0], tool_calls=[ToolCall(name="get_news")])
    samples: dict[str, list[float]] = {}
    interleaved({name: _case(s, answers) for name, s in scorers.items()}, rounds=rounds, n=n,
                samples=samples)
    per_s = {name: batch / (min(samples[name]) / 1e9) for name in scorers}
    base = per_s["answer-relevancy (baseline)"]
    print_table([[name, value, value / base] for name, value in per_s.items()],
                ["scorer (offline judge)", "runs/s", "vs answer relevancy"],
                title=f"offline judges, 3-sentence answers (best of {rounds} interleaved rounds)")
    results: dict[str, Any] = {"environment": environment(),
                               "runs_per_s": per_s,
                               "vs_answer_relevancy": {k: v / base for k, v in per_s.items()}}
    write_json(args.json, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
