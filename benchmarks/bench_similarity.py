"""Content-similarity throughput: the default Dice algorithm against rapidfuzz, side by side.

Pairs per second for short texts (~40 chars) and ~2 KB texts, measured interleaved in one
run (best of the rounds), at two levels:
  * metric: the bare 0..1 function on already processed text (dice_similarity vs rapidfuzz);
  * scorer: ContentSimilarityScorer(algorithm=...).run(...) - what users and online scoring
    call (input normalisation, case/whitespace processing, result object included).
The ratio column is throughput relative to rapidfuzz `ratio` at the same level and size
(target for dice: >= 0.33). `--baseline REV` adds the similarity module as it was at git
revision REV ("dice@REV", "ratio@REV", each row compared with ratio@REV), measured in the
same interleaved rounds, for before/after figures from one run.
A third table gives runs per second of every code scorer (textual difference, keyword coverage,
tool-call accuracy, completeness, tone consistency) next to the content-similarity scorer (dice), on the same pairs.

    python benchmarks/bench_similarity.py [--quick] [--json PATH] [--baseline REV]
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import subprocess
import sys
import tempfile
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment, interleaved, print_table, timeit_ns, write_json

from tracescore.scoring import (
    CompletenessScorer,
    ContentSimilarityScorer,
    KeywordCoverageScorer,
    Scorer,
    TextualDifferenceScorer,
    ToneConsistencyScorer,
    ToolCallAccuracyScorer,
    similarity,
)
from tracescore.scoring.similarity import ALGORITHMS

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


def load_baseline(rev: str) -> types.ModuleType:
    """tracescore/scoring/similarity.py as it was at git revision `rev`, as a module."""
    root = Path(__file__).resolve().parents[1]
    source = subprocess.run(
        ["git", "-C", str(root), "show", f"{rev}:tracescore/scoring/similarity.py"],
        capture_output=True, text=True, check=True).stdout
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "similarity.py")
        path.write_text(source, "utf-8")
        spec = importlib.util.spec_from_file_location(f"similarity_at_{rev}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


def _metric_case(name: str, pairs: list[tuple[str, str]],
                 module: types.ModuleType = similarity) -> Callable[[], None]:
    fn = module._metric(name)
    processed = [(" ".join(a.lower().split()), " ".join(b.lower().split())) for a, b in pairs]

    def run() -> None:
        for a, b in processed:
            fn(a, b)

    return run


def _scorer_case(name: str, pairs: list[tuple[str, str]],
                 module: types.ModuleType = similarity) -> Callable[[], None]:
    scorer = module.ContentSimilarityScorer(algorithm=name)

    def run() -> None:
        for a, b in pairs:
            scorer.run(input=a, output=b, run_id="bench")

    return run


# partial_ratio aligns the shorter text at every offset of the longer one: on two ~2 KB texts
# it is orders of magnitude slower than the rest, so it gets a short separate pass there.
_SLOW = {"2KB": {"partial_ratio"}}


def measure(level: str, size: str, chars: int, batch: int, rounds: int, n: int,
            baseline: tuple[str, types.ModuleType] | None = None) -> dict[str, float]:
    """Pairs per second of every algorithm on the same pairs (best of the interleaved rounds).

    The best round, not the median: on a shared host other processes only ever add time, and
    they do so in bursts that a median of a few rounds does not filter out evenly.
    """
    pairs = make_pairs(chars, batch)
    make = _metric_case if level == "metric" else _scorer_case
    slow = _SLOW.get(size, set())
    cases = {name: make(name, pairs) for name in ALGORITHMS if name not in slow}
    if baseline is not None:
        rev, module = baseline
        cases.update({f"{name}@{rev}": make(name, pairs, module) for name in ("dice", "ratio")})
    samples: dict[str, list[float]] = {}
    interleaved(cases, rounds=rounds, n=n, samples=samples)
    ns_per_batch = {name: min(values) for name, values in samples.items()}
    pairs_per_s = {name: batch / (ns / 1e9) for name, ns in ns_per_batch.items()}
    for name in slow:
        few = pairs[:2]
        ns = timeit_ns(make(name, few), 1)
        pairs_per_s[name] = len(few) / (ns / 1e9)
    return {name: pairs_per_s[name] for name in [*ALGORITHMS, *ns_per_batch]}


CODE_SCORERS: dict[str, Callable[[], Scorer]] = {
    "content-similarity": ContentSimilarityScorer,
    "textual-difference": TextualDifferenceScorer,
    "keyword-coverage": KeywordCoverageScorer,
    "tool-call-accuracy": lambda: ToolCallAccuracyScorer(expected_tool_order=["search", "refund"]),
    "completeness": CompletenessScorer,
    "tone-consistency": ToneConsistencyScorer,
}


def _code_scorer_case(make_scorer: Callable[[], Scorer],
                      pairs: list[tuple[str, str]]) -> Callable[[], None]:
    scorer = make_scorer()
    outputs = [{"text": b, "tool_calls": ["search", "email", "refund"]} for _, b in pairs]
    inputs = [a for a, _ in pairs]

    def run() -> None:
        for a, b in zip(inputs, outputs):
            scorer.run(input=a, output=b, run_id="bench")

    return run


def measure_code_scorers(chars: int, batch: int, rounds: int, n: int) -> dict[str, float]:
    """Runs per second of each code scorer on the same pairs (best of the interleaved rounds)."""
    pairs = make_pairs(chars, batch)
    cases = {name: _code_scorer_case(make, pairs) for name, make in CODE_SCORERS.items()}
    samples: dict[str, list[float]] = {}
    interleaved(cases, rounds=rounds, n=n, samples=samples)
    return {name: batch / (min(samples[name]) / 1e9) for name in cases}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    parser.add_argument("--baseline", metavar="REV",
                        help="also measure the similarity module at this git revision")
    args = parser.parse_args(argv)
    baseline = (args.baseline, load_baseline(args.baseline)) if args.baseline else None
    rounds = 3 if args.quick else 15
    sizes = {
        "short": (40, 200, 5 if args.quick else 100),
        "2KB": (2048, 10, 2 if args.quick else 20),
    }  # chars, pairs per batch, batches/round

    results: dict[str, Any] = {"environment": environment(), "levels": {}}
    for level in ("metric", "scorer"):
        per_size = {
            size: measure(level, size, chars, batch, rounds, n, baseline)
            for size, (chars, batch, n) in sizes.items()
        }
        names = list(per_size["short"])
        reference = {name: f"ratio@{args.baseline}" if "@" in name else "ratio" for name in names}
        rows = []
        for name in names:
            row: list[Any] = [name]
            for size in sizes:
                pps = per_size[size][name]
                row += [pps, pps / per_size[size][reference[name]]]
            rows.append(row)
        headers = ["algorithm"]
        for size in sizes:
            headers += [f"{size} pairs/s", f"{size} vs ratio"]
        print_table(rows, headers, title=f"{level} level (best of {rounds} interleaved rounds)")
        results["levels"][level] = {
            size: {
                name: {
                    "pairs_per_s": per_size[size][name],
                    "vs_ratio": per_size[size][name] / per_size[size][reference[name]],
                }
                for name in names
            }
            for size in sizes
        }
    code = {size: measure_code_scorers(chars, batch, rounds, n)
            for size, (chars, batch, n) in sizes.items()}
    rows = [[name, *(value for size in sizes for value in
                     (code[size][name], code[size][name] / code[size]["content-similarity"]))]
            for name in CODE_SCORERS]
    headers = ["scorer"]
    for size in sizes:
        headers += [f"{size} runs/s", f"{size} vs similarity"]
    print_table(rows, headers, title=f"code scorers (best of {rounds} interleaved rounds)")
    results["code_scorers"] = code
    print()
    for level, figures in results["levels"].items():
        for name in ["dice", f"dice@{args.baseline}"] if baseline else ["dice"]:
            print(f"{name} vs rapidfuzz ratio, {level} level: short "
                  f"{figures['short'][name]['vs_ratio']:.2f}, 2KB "
                  f"{figures['2KB'][name]['vs_ratio']:.2f} (target >= 0.33)")
    write_json(args.json, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
