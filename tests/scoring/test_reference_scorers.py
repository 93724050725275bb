"""Differential tests: our content-similarity, textual-difference, keyword-coverage and
tool-call-accuracy scorers against the reference system's own npm package (@mastra/evals,
pinned in tests/mastra), on hundreds of generated texts.

The reference runs in Node.js over the same cases in one batch; numbers must agree exactly.
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest
from _helpers import npm_project

from tracescore.scoring._jstext import JS_WHITESPACE
from tracescore.scoring.difference import create_textual_difference_scorer
from tracescore.scoring.keywords import create_keyword_coverage_scorer, english_stop_words
from tracescore.scoring.similarity import create_content_similarity_scorer
from tracescore.scoring.tools import create_tool_call_accuracy_scorer

MASTRA = Path(__file__).resolve().parents[1] / "mastra"

# Words of every kind the two scorers treat specially: stop words, digits, punctuation at
# either end, quotes, URLs, HTML, one-character symbols, cased and non-Latin scripts, emoji.
_WORDS = (
    "the", "a", "is", "of", "hello", "Paris", "capital", "France", "refund", "ORDER", "order",
    "shipping", "tomorrow", "Quick", "brown", "fox", "42", "3d", "2024", "1.5", "v2", "x86_64",
    "'quoted'", "''", "'''", "don't", "it's", "“smart”", "‘single’", "(paren)", "end.", "why?",
    "wow!", "a,b", "semi;", "colon:", '"dq"', "http://Example.com/A.", "https://x.io/q?a=1",
    "httpx://no", "<b>bold</b>", "<a href='x'>", "<", ">", "_", "@", "&", "#", "__", "a_b",
    "café", "naïve", "Ελλάδα", "ΣΟΦΟΣ", "москва", "İstanbul", "東京", "🙂", "𝄞music", "ﬀ",
    "A", "I", "Über", "straße", "e\u0301", "-", "--", "...", "?!", "",
)
_SPACES = (" ", " ", " ", "  ", "\t", "\n", "\r\n", "\xa0", "\u2028", "\u3000", "\ufeff", "\x1c",
           "\x85", "\u200b")


def _text(rng: random.Random) -> str:
    parts: list[str] = []
    for _ in range(rng.choice((0, 1, 2, 3, 5, 8, 13, 21))):
        parts.append(rng.choice(_WORDS))
        parts.append(rng.choice(_SPACES))
    text = "".join(parts)
    return text.strip() if rng.random() < 0.5 else text


def _variant(rng: random.Random, text: str) -> str:
    """A related text: words kept, dropped, replaced or swapped around."""
    words = text.split(" ")
    out = [w for w in words if rng.random() > 0.2]
    if out and rng.random() < 0.5:
        out.insert(rng.randrange(len(out) + 1), rng.choice(_WORDS))
    if rng.random() < 0.3:
        rng.shuffle(out)
    joined = " ".join(out)
    return joined.upper() if rng.random() < 0.1 else joined


def _cases(count: int = 400, seed: int = 16) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    cases = [("", ""), ("", "x"), ("x", ""), ("same", "same"), ("a  b", "a b"), (" ", ""),
             ("The quick brown fox", "the quick brown fox"), ("𝄞", "𝄞𝄞"), ("\ud800", "\ud800x")]
    while len(cases) < count:
        a = _text(rng)
        b = _variant(rng, a) if rng.random() < 0.7 else _text(rng)
        cases.append((a, b) if rng.random() < 0.5 else (b, a))
    return cases


def _reference(script: Path, *args: str, cases: list[dict[str, Any]] | None = None) -> Any:
    payload = json.dumps({"cases": cases or []})
    done = subprocess.run(["node", str(script), *args], input=payload.encode(), capture_output=True,
                          check=True, timeout=300)  # fmt: skip
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def reference() -> Path:
    return npm_project(MASTRA, "score.mjs", "mastra-evals")


@pytest.fixture(scope="module")
def cases() -> list[tuple[str, str]]:
    return _cases()


def test_generated_cases_cover_the_hard_parts(cases: list[tuple[str, str]]) -> None:
    texts = [t for pair in cases for t in pair]
    assert len(cases) >= 300
    for needle in ("", "🙂", "http", "<b>", "'", "42", "\xa0", "\ufeff", "\x85"):
        assert sum(needle in t for t in texts) >= 3, needle


def test_textual_difference_equals_the_reference(reference: Path,
                                                 cases: list[tuple[str, str]]) -> None:
    theirs = _reference(reference, cases=[
        {"scorer": "textual-difference", "input": a, "output": b} for a, b in cases])
    scorer = create_textual_difference_scorer()
    for (a, b), expected in zip(cases, theirs, strict=True):
        ours = scorer.run(input=a, output=b)
        step = ours.preprocess_step_result
        got = {"score": ours.score, "ratio": step["ratio"], "changes": step["changes"],
               "lengthDiff": step["length_diff"], "confidence": step["confidence"]}
        assert got == {"score": expected["score"], **expected["preprocess"]}, (a, b)


# both given (Mastra destructures its options: one given leaves the other undefined, i.e. off)
@pytest.mark.parametrize("options", [{}, *({"ignoreCase": case, "ignoreWhitespace": space}
                                           for case in (True, False) for space in (True, False))])
def test_content_similarity_equals_the_reference(reference: Path, cases: list[tuple[str, str]],
                                                 options: dict[str, bool]) -> None:
    theirs = _reference(reference, cases=[
        {"scorer": "content-similarity", "input": a, "output": b, "options": options}
        for a, b in cases])
    scorer = create_content_similarity_scorer(
        ignore_case=options.get("ignoreCase", True),
        ignore_whitespace=options.get("ignoreWhitespace", True))
    partial = 0
    for (a, b), expected in zip(cases, theirs, strict=True):
        ours = scorer.run(input=a, output=b)
        assert ours.score == expected["score"], (a, b)
        partial += 0 < ours.score < 1
    assert partial >= 150  # many cases are partly similar, not only 0 and 1


def test_keyword_coverage_equals_the_reference(reference: Path,
                                               cases: list[tuple[str, str]]) -> None:
    theirs = _reference(reference, cases=[
        {"scorer": "keyword-coverage", "input": a, "output": b} for a, b in cases])
    scorer = create_keyword_coverage_scorer()
    covered = 0
    for (a, b), expected in zip(cases, theirs, strict=True):
        ours = scorer.run(input=a, output=b)
        assert ours.score == expected["score"], (a, b)
        keywords = expected["preprocess"].get("result", expected["preprocess"])  # both empty
        assert ours.preprocess_step_result["reference_keywords"] == keywords["referenceKeywords"]
        assert ours.preprocess_step_result["response_keywords"] == keywords["responseKeywords"]
        assert ours.analyze_step_result == {
            "total_keywords": expected["analyze"]["totalKeywordsLength"],
            "matched_keywords": expected["analyze"]["matchedKeywordsLength"]}
        covered += 0 < ours.score < 1
    assert covered >= 50  # the cases exercise partial coverage, not only 0 and 1


def test_stop_words_equal_the_installed_packages(reference: Path) -> None:
    theirs = _reference(reference, "stopwords")
    assert english_stop_words() == frozenset(theirs)


def test_javascript_whitespace_set(reference: Path) -> None:
    assert sorted(map(ord, JS_WHITESPACE)) == _reference(reference, "whitespace")


_TOOLS = ("search", "refund", "weather", "email")


def _tool_cases(count: int = 400, seed: int = 17) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        calls = [rng.choice(_TOOLS) for _ in range(rng.choice((0, 1, 1, 2, 3, 4)))]
        options: dict[str, Any] = {"strictMode": rng.random() < 0.5}
        if rng.random() < 0.5:
            options["expectedTool"] = rng.choice(_TOOLS)
        if "expectedTool" not in options or rng.random() < 0.3:
            order = list(calls) if calls and rng.random() < 0.4 else \
                [rng.choice(_TOOLS) for _ in range(rng.choice((1, 2, 3)))]
            options["expectedToolOrder"] = order
        cases.append({"scorer": "tool-call-accuracy", "input": "q", "output": "a",
                      "options": options, "tools": calls})
    return cases


def _openai_messages(calls: list[str]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "q"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": "{}"}}
                for i, name in enumerate(calls)]},
            *({"role": "tool", "tool_call_id": f"c{i}", "content": "ok"} for i in range(len(calls))),
            {"role": "assistant", "content": "a"}]


def test_tool_call_accuracy_equals_the_reference(reference: Path) -> None:
    cases = _tool_cases()
    theirs = _reference(reference, cases=cases)
    passed = 0
    for case, expected in zip(cases, theirs, strict=True):
        scorer = create_tool_call_accuracy_scorer(options=case["options"])
        ours = scorer.run(input=case["input"], output=_openai_messages(case["tools"]))
        step, their_step = ours.preprocess_step_result, expected["preprocess"]
        assert ours.score == expected["score"], case
        assert step["actual_tools"] == their_step["actualTools"] == case["tools"]
        assert step["correct_tool_called"] == their_step["correctToolCalled"], case
        assert step["correct_order_called"] == their_step["correctOrderCalled"], case
        passed += ours.score == 1
    assert 40 <= passed <= 360  # both outcomes are well represented
