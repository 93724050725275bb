"""A scorer's names are declared once, on its class: the registry, the command and the gateway
accept exactly what the classes declare, and scoring/ imports without a circle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tracescore import ConfigurationError, scoring
from tracescore.cli._setup import SCORER_NAMES
from tracescore.scoring import Scorer
from tracescore.scoring._registry import JUDGED, SCORER_ALIASES, SCORER_IDS, create_scorer

# every name the command, the gateway config and configure(scorers=...) accepted before the
# names moved onto the scorer classes
NAMES_BEFORE = {
    "relevancy": "answer-relevancy", "answer-relevancy": "answer-relevancy",
    "llm-judge": "llm-judge", "similarity": "content-similarity",
    "content-similarity": "content-similarity", "textual-difference": "textual-difference",
    "difference": "textual-difference", "keyword-coverage": "keyword-coverage",
    "keywords": "keyword-coverage", "tool-call-accuracy": "tool-call-accuracy",
    "completeness": "completeness", "tone-consistency": "tone-consistency",
    "tone": "tone-consistency", "faithfulness": "faithfulness", "hallucination": "hallucination",
    "context-relevance": "context-relevance", "toxicity": "toxicity", "bias": "bias",
    "llm-tool-call-accuracy": "llm-tool-call-accuracy",
    "tool-call-accuracy-llm": "llm-tool-call-accuracy",
    "judged-tool-call-accuracy": "llm-tool-call-accuracy",
}
# the run and conversation scorers, added since
NAMES_ADDED = {
    "trajectory-accuracy": "trajectory-accuracy", "trajectory": "trajectory",
    "llm-trajectory-accuracy": "llm-trajectory-accuracy",
    "trajectory-accuracy-llm": "llm-trajectory-accuracy",
    "judged-trajectory-accuracy": "llm-trajectory-accuracy",
    "multi-turn-judge": "multi-turn-judge", "multi-turn": "multi-turn-judge",
    # the code checks
    **{f"check-{c}": f"check-{c}" for c in (
        "includes", "excludes", "equals", "matches", "similarity", "called-tool", "did-not-call",
        "tool-order", "max-tool-calls", "used-no-tools", "no-tool-errors")},
}
# the judged scorers of the reference's library ported last (issue 37)
NAMES_ADDED |= {sid: sid for sid in (
    "answer-similarity", "context-precision", "context-recall", "noise-sensitivity",
    "prompt-alignment", "summarization", "rubric")}
SCORING = Path(scoring.__file__).parent


def _declared_classes() -> list[type[Scorer]]:
    return [c for c in vars(scoring).values()
            if isinstance(c, type) and issubclass(c, Scorer) and c.__dict__.get("factory")]


def test_the_names_accepted_before_still_name_the_same_scorers() -> None:
    assert SCORER_ALIASES == NAMES_BEFORE | NAMES_ADDED
    assert set(NAMES_BEFORE) <= set(SCORER_NAMES)  # the command offers each of them


def test_the_registry_holds_what_each_scorer_class_declares() -> None:
    classes = _declared_classes()
    assert sorted(c.id for c in classes) == sorted(SCORER_IDS)
    for cls in classes:
        assert {n for n, sid in SCORER_ALIASES.items() if sid == cls.id} == {cls.id, *cls.aliases}
        assert (cls.id in JUDGED) == (cls.uses_judge and not cls.named_by_user), cls
        assert callable(getattr(__import__(cls.__module__, fromlist=["_"]), str(cls.factory)))


def test_a_subclass_of_a_built_in_scorer_adds_no_name() -> None:
    before = dict(SCORER_ALIASES)

    class Stricter(scoring.AnswerRelevancyScorer):
        pass

    assert SCORER_ALIASES == before
    with pytest.raises(ConfigurationError, match="unknown scorer"):
        create_scorer("stricter")


def _imports(path: Path) -> set[str]:
    """The tracescore.scoring modules `path` imports, lazy imports inside functions included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            found |= {n for n in names if (SCORING / (n.split(".")[-1] + ".py")).exists()
                      and n.startswith("tracescore.scoring.")}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("tracescore.scoring.")}
    return found


def test_scoring_modules_import_without_a_circle_and_the_names_are_a_leaf() -> None:
    graph = {f"tracescore.scoring.{p.stem}": _imports(p) for p in SCORING.glob("*.py")
             if p.stem != "__init__"}
    names = SCORING / "_names.py"
    assert not [n for n in ast.walk(ast.parse(names.read_text("utf-8")))
                if isinstance(n, (ast.Import, ast.ImportFrom))
                and "tracescore" in (getattr(n, "module", None) or "")]

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(dep == goal or (dep not in seen and reaches(dep, goal, seen | {dep}))
                   for dep in graph.get(start, ()))

    circles = sorted(m for m in graph if reaches(m, m, set()))
    assert circles == []


def test_the_command_lists_the_names_the_scorer_classes_declare() -> None:
    # the command lists them statically so that its start-up need not import the scorers
    from tracescore.cli._scorer_names import CODE_SCORERS, JUDGED_SCORERS
    from tracescore.scoring._names import DECLARED

    assert SCORER_NAMES == tuple(n for d in DECLARED.values() for n in (d.id, *d.aliases))
    assert CODE_SCORERS == tuple(d.short_name for d in DECLARED.values() if not d.uses_judge)
    assert JUDGED_SCORERS == tuple(d.short_name for d in DECLARED.values() if d.uses_judge)


def test_the_command_starts_without_importing_the_scorers() -> None:
    import subprocess
    import sys

    code = ("import sys, tracescore.cli._app; "
            "print(any(m.startswith('tracescore.scoring') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
