"""The built-in scorers' names as the command offers them, listed statically.

The scorer classes declare their names (`scoring/_names.py` fills as the classes are defined),
but importing the scoring package costs about 150 ms, which `tracescore --help`, `inspect` and
`demo` need not pay. tests/scoring/test_scorer_declarations.py checks these lists equal the declared ones.
"""

from __future__ import annotations

# every scorer's id and aliases, in declaration order
SCORER_NAMES = (
    "answer-similarity", "bias",
    "check-includes", "check-excludes", "check-equals", "check-matches", "check-similarity",
    "check-called-tool", "check-did-not-call", "check-tool-order", "check-max-tool-calls",
    "check-used-no-tools", "check-no-tool-errors",
    "completeness", "context-precision", "context-recall", "context-relevance",
    "textual-difference", "difference",
    "faithfulness", "hallucination", "keyword-coverage", "keywords", "llm-judge",
    "multi-turn-judge", "multi-turn", "noise-sensitivity", "prompt-alignment",
    "answer-relevancy", "relevancy", "rubric", "content-similarity",
    "similarity", "summarization", "tone-consistency", "tone", "tool-call-accuracy", "llm-tool-call-accuracy",
    "tool-call-accuracy-llm", "judged-tool-call-accuracy", "toxicity", "trajectory-accuracy",
    "trajectory", "llm-trajectory-accuracy", "trajectory-accuracy-llm",
    "judged-trajectory-accuracy",
)

# each scorer's short name, for the help: the code scorers, then the judged ones
CODE_SCORERS = ("check-includes", "check-excludes", "check-equals", "check-matches",
                "check-similarity", "check-called-tool", "check-did-not-call", "check-tool-order",
                "check-max-tool-calls", "check-used-no-tools", "check-no-tool-errors",
                "completeness", "difference", "keywords", "similarity", "tone",
                "tool-call-accuracy", "trajectory-accuracy", "trajectory")
JUDGED_SCORERS = ("answer-similarity", "bias", "context-precision", "context-recall",
                  "context-relevance", "faithfulness", "hallucination", "llm-judge",
                  "multi-turn", "noise-sensitivity", "prompt-alignment", "relevancy", "rubric",
                  "summarization", "llm-tool-call-accuracy", "toxicity",
                  "llm-trajectory-accuracy")
