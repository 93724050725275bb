"""The built-in scorers' names as the command offers them, listed statically.

The scorer classes declare their names (`scoring/_names.py` fills as the classes are defined),
but importing the scoring package costs about 150 ms, which `tracescore --help`, `inspect` and
`demo` need not pay. tests/test_scorer_declarations.py checks these lists equal the declared ones.
"""

from __future__ import annotations

# every scorer's id and aliases, in declaration order
SCORER_NAMES = (
    "bias",
    "check-includes", "check-excludes", "check-equals", "check-matches", "check-similarity",
    "check-called-tool", "check-did-not-call", "check-tool-order", "check-max-tool-calls",
    "check-used-no-tools", "check-no-tool-errors",
    "completeness", "context-relevance", "textual-difference", "difference",
    "faithfulness", "hallucination", "keyword-coverage", "keywords", "llm-judge",
    "multi-turn-judge", "multi-turn", "answer-relevancy", "relevancy", "content-similarity",
    "similarity", "tone-consistency", "tone", "tool-call-accuracy", "llm-tool-call-accuracy",
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
JUDGED_SCORERS = ("bias", "context-relevance", "faithfulness", "hallucination", "llm-judge",
                  "multi-turn", "relevancy", "llm-tool-call-accuracy", "toxicity",
                  "llm-trajectory-accuracy")
