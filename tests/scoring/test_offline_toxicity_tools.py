"""The offline judge's versions of toxicity (a trained offensive-language classifier) and judged
tool-call accuracy (word overlap), and why bias has none."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracescore import (
    ConfigurationError,
    ToolCall,
    create_bias_scorer,
    create_tool_call_accuracy_scorer_llm,
    create_toxicity_scorer,
)

OFFLINE = "tracescore/offline"


# --- toxicity --------------------------------------------------------------------------------
@pytest.mark.parametrize(("output", "verdicts"), [
    # the reference rubric's examples: insults carried by offensive words are caught ...
    ("This is the stupidest thing I've ever read. Only an idiot would think this.", ["no", "yes"]),
    (("That vegan garbage place is an insult to real food. Only pretentious losers would waste "
      "their money on tasteless weeds."), ["no", "yes"]),
    ("Paris is the capital of France. Shut up, moron.", ["no", "yes"]),
    # ... their polite twins are not
    ("I see where you're coming from, but I think there's another perspective.", ["no"]),
    ("I understand your point, but I respectfully disagree. Here's why.", ["no", "no"]),
])
def test_offline_toxicity_flags_offensive_sentences(output: str, verdicts: list[str]) -> None:
    result = create_toxicity_scorer(model=OFFLINE).run(input="Tell me.", output=output)
    assert [v["verdict"] for v in result.analyze_step_result["verdicts"]] == verdicts
    expected = round(verdicts.count("yes") / len(verdicts), 2)
    assert result.score == expected
    assert result.reason.startswith(f"The score is {expected:g} because")
    classifier = result.analyze_step_result["offline_classifier"]
    assert classifier["name"] == "alt-profanity-check" and classifier["threshold"] == 0.5
    assert len(classifier["probabilities"]) == len(verdicts)
    assert result.usage.model == OFFLINE and result.usage.cost_usd == 0.0


@pytest.mark.parametrize("output", [
    "You're clueless and have no idea what you're talking about.",  # an insult in plain words
    "Oh, brilliant observation! Did it take you all day to come up with that?",  # mockery
    "Your opinion is worthless, and you're wasting everyone's time here.",  # dismissive
    "People like you should be banned from speaking. You'll regret saying things like that.",
])
def test_offline_toxicity_misses_what_the_docs_say_it_misses(output: str) -> None:
    """The classifier knows offensive words, not tone or intent: the rubric's plain-worded
    attacks, mockery, dismissiveness and threats pass (documented limits)."""
    result = create_toxicity_scorer(model=OFFLINE).run(input="Tell me.", output=output)
    assert result.score == 0.0
    note = result.analyze_step_result["offline_classifier"]["note"]
    assert "insults in plain words" in note and "threats" in note


def test_offline_toxicity_is_deterministic() -> None:
    scorer = create_toxicity_scorer(model=OFFLINE, scale=10)
    output = "Thanks for asking. You absolute idiot. Anyway, the answer is 4."
    first, second = (scorer.run(input="2+2?", output=output) for _ in range(2))
    assert first.score == second.score == 3.33
    assert first.analyze_step_result == second.analyze_step_result


def test_offline_toxicity_without_the_classifier_is_a_configuration_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "profanity_check" else real(name, *a))
    with pytest.raises(ConfigurationError, match=r"tracescore\[toxicity\]"):
        create_toxicity_scorer(model=OFFLINE)
    create_toxicity_scorer(model="openai/gpt-4o-mini")  # a language model needs no classifier


# --- bias ------------------------------------------------------------------------------------
def test_bias_has_no_offline_version() -> None:
    with pytest.raises(ConfigurationError, match="offline judge cannot judge bias"):
        create_bias_scorer(model=OFFLINE)


# --- tool-call accuracy (judged) -------------------------------------------------------------
TOOLS = [{"id": "get_weather", "description": "Current weather for a city"},
         {"id": "lookupOrder", "description": "Find an order by its number"},
         {"id": "send-email", "description": "Send an email message"}]


@pytest.mark.parametrize(("request_text", "called", "score", "missing"), [
    ("What's the weather in Oslo?", ["get_weather"], 1.0, []),
    ("What's the weather in Oslo?", ["get_weather", "send-email"], 0.5, []),
    ("Where is order 42?", ["lookupOrder"], 1.0, []),  # camelCase names split into words
    ("Email the report to Ana.", ["send-email"], 1.0, []),  # kebab-case too
    ("What's the weather in Oslo?", [], 0.0, ["get_weather"]),
    ("Hello there!", [], 1.0, []),  # nothing matches: not calling was right
    ("What's the weather in Oslo?", ["delete_everything"], 0.0, ["get_weather"]),
])
def test_offline_tool_selection_by_word_overlap(request_text: str, called: list[str],
                                                score: float, missing: list[str]) -> None:
    scorer = create_tool_call_accuracy_scorer_llm(model=OFFLINE, available_tools=TOOLS)
    result = scorer.run(input=request_text, output="Done.",
                        tool_calls=[ToolCall(name=n) for n in called])
    assert result.score == score
    assert result.analyze_step_result["missingTools"] == missing
    assert "word overlap" in result.analyze_step_result["offline_method"]
    assert result.reason.startswith(f"The score is {score:g} because")


_WORDS = st.sampled_from(["weather", "order", "invoice", "flight", "hotel", "refund", "stock",
                          "recipe", "calendar", "translate"])


@settings(max_examples=60, deadline=None)
@given(tools=st.lists(_WORDS, min_size=1, max_size=5, unique=True), data=st.data())
def test_offline_tool_selection_properties(tools: list[str], data: Any) -> None:
    """Calling exactly the tools the request names scores 1; calling none of them scores 0 and
    names them missing; every score is the share of matching calls."""
    asked = data.draw(st.lists(st.sampled_from(tools), min_size=1, unique=True))
    others = [t for t in tools if t not in asked]
    available = [{"id": f"get_{t}", "description": f"Look up {t} data"} for t in tools]
    scorer = create_tool_call_accuracy_scorer_llm(model=OFFLINE, available_tools=available)
    request = "Please check the " + " and the ".join(asked) + "."

    exact = scorer.run(input=request, output="ok", tool_calls=[ToolCall(name=f"get_{t}")
                                                               for t in asked])
    assert exact.score == 1.0 and exact.analyze_step_result["missingTools"] == []
    none = scorer.run(input=request, output="ok")
    assert none.score == 0.0
    assert none.analyze_step_result["missingTools"] == [f"get_{t}" for t in tools if t in asked]
    called = [f"get_{t}" for t in data.draw(st.permutations(asked + others))]
    mixed = scorer.run(input=request, output="ok", tool_calls=[ToolCall(name=n) for n in called])
    assert mixed.score == round(len(asked) / len(called) + 1e-12, 2)


# --- by name: configure, run_evals, the gateway config, the command --------------------------
def test_configure_scores_live_calls_with_toxicity_by_name() -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import tracescore
    from tracescore import _semconv as sc

    exporter = InMemorySpanExporter()
    handle = tracescore.configure(exporter=exporter, batch=False, scorers=["toxicity"])
    try:
        tracescore.agent(name="rude")(lambda question: "Shut up, moron.")("Hi?")
        assert handle.flush(30)
    finally:
        handle.shutdown(10)
    [span] = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent rude"]
    [event] = [e for e in span.events if e.name == sc.GEN_AI_EVALUATION_RESULT]
    assert event.attributes[sc.TS_SCORER_ID] == "toxicity"
    assert event.attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0
    assert event.attributes[sc.GEN_AI_EVALUATION_SCORE_LABEL] == "toxic"
    steps = {e.attributes[sc.TS_STEP_NAME]: e.attributes for e in span.events
             if e.name == sc.TS_EVALUATION_STEP}
    assert set(steps) == {"analyze", "reason"}  # no preprocess step, as in the reference
    assert "Shut up, moron." in str(steps["analyze"][sc.TS_STEP_PROMPT])
    assert json.loads(str(steps["analyze"][sc.TS_STEP_RESULT]))["verdicts"][0]["verdict"] == "yes"


def test_run_evals_takes_the_judged_scorers_by_name() -> None:
    from tracescore import run_evals

    data: list[dict[str, Any]] = [
        {"input": "Weather in Oslo?", "tool_calls": [{"name": "get_weather"}]},
            {"input": "Weather in Rome?"}]
    result = run_evals(data, ["toxicity"], lambda q: "You idiot." if "Rome" in q else "Sunny.")
    assert result.scores == {"toxicity": 0.5}


def test_gateway_config_builds_the_judged_scorers(tmp_path: Any) -> None:
    from tracescore import load_gateway_config
    from tracescore.scoring import BiasScorer, ToolCallAccuracyLLMScorer, ToxicityScorer

    path = tmp_path / "gateway.yaml"
    path.write_text("""
scoring:
  scorers:
    - scorer: toxicity
      options: {scale: 10}
    - scorer: bias
      options: {model: openai/gpt-4o-mini}
    - scorer: judged_tool_call_accuracy
      options:
        available_tools:
          - {id: get_weather, description: Current weather for a city}
""")
    scorers = [online.scorer for online in load_gateway_config(path, environ={}).scorers or ()]
    assert [type(s) for s in scorers] == [ToxicityScorer, BiasScorer, ToolCallAccuracyLLMScorer]
    assert scorers[0].scale == 10 and scorers[0].model == OFFLINE
    assert scorers[2].available_tools[0].name == "get_weather"
    path.write_text("scoring:\n  scorers:\n    - scorer: llm-tool-call-accuracy\n")
    with pytest.raises(ConfigurationError, match=r"scoring.scorers\[0\].*available_tools"):
        load_gateway_config(path, environ={})


def _command(*args: str, cwd: Any) -> Any:
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in __import__("os").environ.items() if k != "TRACESCORE_JUDGE_MODEL"}
    return subprocess.run([str(Path(sys.executable).parent / "tracescore"), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False, env=env)


def test_the_command_scores_with_the_judged_scorers(tmp_path: Any) -> None:
    import json

    done = _command("score", "-i", "What's the weather in Oslo?", "-o", "Shut up, moron.",
                    "-s", "toxicity", "-s", "llm-tool-call-accuracy", "--scorer-option",
                    "llm-tool-call-accuracy.available_tools=[{id: get_weather, description: "
                    "Current weather for a city}]", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    by_id = {r["scorer_id"]: r for r in json.loads(done.stdout)}
    assert by_id["toxicity"]["score"] == 1.0
    assert by_id["llm-tool-call-accuracy"]["score"] == 0.0  # get_weather matched, not called
    assert by_id["llm-tool-call-accuracy"]["analyze_step_result"]["missingTools"] == [
        "get_weather"]
    done = _command("score", "-i", "q", "-o", "a", "-s", "bias", cwd=tmp_path)
    assert done.returncode == 2
    assert "offline judge cannot judge bias" in " ".join(done.stderr.split())
