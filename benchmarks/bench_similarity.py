"""Content-similarity throughput: the default Dice algorithm against rapidfuzz, side by side.

Pairs per second for short texts (~40 chars) and ~2 KB texts, measured interleaved in one
run, at two levels:
  * metric: the bare 0..1 function on already processed text (dice_similarity vs rapidfuzz);
  * scorer: ContentSimilarityScorer(algorithm=...).run(...) - what users and online scoring
    call (input normalisation, case/whitespace processing, result object included).
The ratio column is throughput relative to rapidfuzz `ratio` at the same level and size
(target for dice at the scorer level: >= 0.33).

    python benchmarks/bench_similarity.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment, interleaved, print_table, timeit_ns, write_json

from tracescore.scoring.similarity import ALGORITHMS, ContentSimilarityScorer, _metric

_WORDS = (
    "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "paris", "capital", "france",
    "answer", "relevant", "model", "judge", "score", "latency", "token", "request", "service",
    "customer", "order", "refund", "shipping", "invoice", "account", "password", "reset",
    "update", "status", "delivered", "tomorrow", "please", "thanks",
)


def _text(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(_WORDS)
        words.append(word.capitalize() if rng.random() < 0.1 else word)
        size += len(word) + 1
    return " ".join(words)


def _variant(rng: random.Random, text: str) -> str:
    """A similar text: about a fifth of the words replaced."""
    return " ".join(rng.choice(_WORDS) if rng.random() < 0.2 else w for w in text.split())


def make_pairs(chars: int, count: int, seed: int = 7) -> list[tuple[str, str]]:
    rng = random.Random(seed + chars)
    pairs = []
    for _ in range(count):
        text = _text(rng, chars)
        pairs.append((text, _variant(rng, text)))
    return pairs


def _metric_case(name: str, pairs: list[tuple[str, str]]) -> Callable[[], None]:
    fn = _metric(name)
    processed = [(" ".join(a.lower().split()), " ".join(b.lower().split())) for a, b in pairs]

    def run() -> None:
        for a, b in processed:
            fn(a, b)

    return run


def _scorer_case(name: str, pairs: list[tuple[str, str]]) -> Callable[[], None]:
    scorer = ContentSimilarityScorer(algorithm=name)

    def run() -> None:
        for a, b in pairs:
            scorer.run(input=a, output=b, run_id="bench")

    return run


# partial_ratio aligns the shorter text at every offset of the longer one: on two ~2 KB texts
# it is orders of magnitude slower than the rest, so it gets a short separate pass there.
_SLOW = {"2KB": {"partial_ratio"}}


def measure(level: str, size: str, chars: int, batch: int, rounds: int, n: int) -> dict[str, float]:
    """Pairs per second of every algorithm on the same pairs (interleaved medians)."""
    pairs = make_pairs(chars, batch)
    make = _metric_case if level == "metric" else _scorer_case
    slow = _SLOW.get(size, set())
    fast = [name for name in ALGORITHMS if name not in slow]
    ns_per_batch = interleaved({name: make(name, pairs) for name in fast}, rounds=rounds, n=n)
    pairs_per_s = {name: batch / (ns / 1e9) for name, ns in ns_per_batch.items()}
    for name in slow:
        few = pairs[:2]
        ns = timeit_ns(make(name, few), 1)
        pairs_per_s[name] = len(few) / (ns / 1e9)
    return {name: pairs_per_s[name] for name in ALGORITHMS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    args = parser.parse_args(argv)
    rounds = 3 if args.quick else 15
    sizes = {
        "short": (40, 200, 5 if args.quick else 100),
        "2KB": (2048, 10, 2 if args.quick else 20),
    }  # chars, pairs per batch, batches/round

    results: dict[str, Any] = {"environment": environment(), "levels": {}}
    for level in ("metric", "scorer"):
        per_size = {
            size: measure(level, size, chars, batch, rounds, n)
            for size, (chars, batch, n) in sizes.items()
        }
        rows = []
        for name in ALGORITHMS:
            row: list[Any] = [name]
            for size in sizes:
                pps = per_size[size][name]
                row += [pps, pps / per_size[size]["ratio"]]
            rows.append(row)
        headers = ["algorithm"]
        for size in sizes:
            headers += [f"{size} pairs/s", f"{size} vs ratio"]
        print_table(rows, headers, title=f"{level} level (median of {rounds} interleaved rounds)")
        results["levels"][level] = {
            size: {
                name: {
                    "pairs_per_s": per_size[size][name],
                    "vs_ratio": per_size[size][name] / per_size[size]["ratio"],
                }
                for name in ALGORITHMS
            }
            for size in sizes
        }
    dice = results["levels"]["scorer"]
    print(
        f"\ndice vs rapidfuzz ratio at the scorer level: short {dice['short']['dice']['vs_ratio']:.2f}, "
        f"2KB {dice['2KB']['dice']['vs_ratio']:.2f} (target >= 0.33)"
    )
    write_json(args.json, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
