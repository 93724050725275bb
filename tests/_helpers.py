"""Helpers shared by the end-to-end test modules; import them explicitly (`from _helpers import ...`)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import tracescore
from tracescore import _setup
from tracescore._config import reset_content_settings
from tracescore.scoring import Scorer, ScoreResult
from tracescore.testing import StubLLMServer
from tracescore.testing._tools import _file_lock, cache_dir

GEO_ANSWER = "Paris is the capital of France."


# A budget, not a timing: flush() and the waits return as soon as scoring is done. A judged scorer
# runs in a scoring process that imports litellm before its first call, about 5 s of CPU, so over
# 30 s of wall time on a loaded 2-core CI machine; held spans must outlive that (max_wait_s) too.
SCORING_BUDGET_S = 120.0
# the options of a litellm judge talking to a StubLLMServer (add api_base=stub.base_url)
STUB_JUDGE: dict[str, Any] = {"model": "openai/judge-stub", "api_key": "sk-test", "timeout": 10,
                              "backoff_base_s": 0.001, "backoff_max_s": 0.01}


def user_prompt(request: Any) -> str:
    """The user message of a chat request the stub received."""
    return next(m["content"] for m in request["messages"] if m["role"] == "user")


def script_claims(stub: StubLLMServer, claims: list[str], verdicts: list[str],
                  reason: str = "The score is X because of the verdicts.") -> None:
    """Queue a claims scorer's three judge replies: the claims, a verdict each, the reason."""
    stub.enqueue({"claims": claims})
    stub.enqueue({"verdicts": [{"verdict": v, "reason": f"verdict {v}"} for v in verdicts]})
    stub.enqueue({"reason": reason})

def shut_down_pipelines() -> None:
    """Shut down every pipeline a test configured and restore the default content settings."""
    while _setup._handles:
        _setup._handles[-1].shutdown(5)
    reset_content_settings()


def geo_agent(stub: StubLLMServer, *, model: str = "agent-llm") -> Callable[[str], str]:
    """The agent "geo": a `lookup` tool call, then one litellm chat call (`openai/{model}`) to the stub."""
    import litellm

    @tracescore.tool
    def lookup(city: str) -> str:
        return f"{city} is in France"

    @tracescore.agent(name="geo")
    def geo(question: str) -> str:
        facts = lookup("Paris")
        reply = litellm.completion(
            model=f"openai/{model}", api_base=stub.base_url, api_key="sk-test", max_retries=0,
            messages=[{"role": "user", "content": f"{facts}. {question}"}],
        )
        return reply.choices[0].message.content

    return geo


RUBRIC_REPLIES = {
    "llm_judge_verdict": {"reason": "The answer thanks the user and uses no rude words.",
                          "verdict": "pass"},
    "llm_judge_score": {"reason": "The refund date is in the context; the amount is not.",
                        "score": 4},
    # the bias scorer's steps in docs/scorers.md
    "bias_opinions": {"opinions": ["Crime is always worse in big cities.",
                                   "I think the new park is lovely."]},
    "bias_verdicts": {"results": [
        {"result": "yes", "reason": "Geographical bias: 'always worse in big cities' generalises "
                                    "about where people live; say 'Some crimes are more common "
                                    "in dense areas.'"},
        {"result": "no", "reason": "A personal taste about a park, stated neutrally."}]},
    "bias_reason": {"reason": "The score is 0.5 because 'Crime is always worse in big cities' "
                              "generalises about city dwellers, while the view of the park is "
                              "neutral."},
    # the multi-turn judge in docs/scorers.md
    "multi_turn_verdict": {"satisfied": True, "reasoning": "Turn 2 gives London's forecast and "
                                                           "turn 3 says to pack an umbrella."},
    # the judged scorers of issue 37 in docs/scorers.md
    "answer_similarity_units": {"outputUnits": ["Refunds take 5 days"], "groundTruthUnits": [
        "Refunds take 5 business days", "Refunds go to the original card"]},
    "answer_similarity_matches": {"matches": [
        {"groundTruthUnit": "Refunds take 5 business days", "outputUnit": "Refunds take 5 days",
         "matchType": "semantic", "explanation": "Same duration, less precise."},
        {"groundTruthUnit": "Refunds go to the original card", "outputUnit": None,
         "matchType": "missing", "explanation": "The card is not mentioned."}],
        "extraInOutput": [], "contradictions": []},
    "answer_similarity_reason": {"reason": "The score is 0.27 because the duration matches in "
                                           "meaning but the card is missing."},
    "context_precision_verdicts": {"verdicts": [
        {"context_index": 0, "verdict": "no", "reason": "About the office, not refunds."},
        {"context_index": 1, "verdict": "yes", "reason": "States the refund time."}]},
    "context_precision_reason": {"reason": "The score is 0.5 because the only useful piece was "
                                           "ranked second."},
    "context_recall_claims": {"claims": ["Refunds take 5 days",
                                         "Refunds go to the original card"]},
    "context_recall_verdicts": {"verdicts": [
        {"verdict": "yes", "reason": "Piece 1 states it."},
        {"verdict": "no", "reason": "No piece mentions the card."}]},
    "context_recall_reason": {"reason": "The score is 0.5 because the context never says where "
                                        "refunds go."},
    "noise_sensitivity_analysis": {"dimensions": [
        {"dimension": "content accuracy", "impactLevel": "none", "specificChanges": "None.",
         "noiseInfluence": "The cat question was ignored."},
        {"dimension": "focus", "impactLevel": "minimal", "specificChanges": "One extra "
         "sentence.", "noiseInfluence": "It mentions cats in passing."}],
        "majorIssues": [], "robustnessScore": 0.9,
        "overallAssessment": "The answer stayed on the refund policy."},
    "noise_sensitivity_reason": {"reason": "The score is 0.9 because the answer kept to the "
                                           "refund policy and only mentioned cats in passing."},
    "prompt_alignment_analysis": {
        "intentAlignment": {"score": 1, "primaryIntent": "refund time", "isAddressed": True,
                            "reasoning": "It gives the refund time."},
        "requirementsFulfillment": {"requirements": [
            {"requirement": "one sentence", "isFulfilled": False,
             "reasoning": "It uses two sentences."}], "overallScore": 0},
        "completeness": {"score": 1, "missingElements": [], "reasoning": "Complete."},
        "responseAppropriateness": {"score": 0.5, "formatAlignment": False,
                                    "toneAlignment": True, "reasoning": "Too long."},
        "overallAssessment": "Answers the question but breaks the one-sentence rule."},
    "prompt_alignment_reason": {"reason": "The score is 0.6 because the answer gives the refund "
                                          "time but ignores the one-sentence rule."},
    "summarization_source": {"alignment": [
        {"claim": "Refunds take 5 days", "supported": True, "reason": "Stated."},
        {"claim": "The office is in Munich", "supported": False, "reason": "It is in Berlin."}],
        "questions": ["How long do refunds take?", "Where is the office?",
                      "Can opened items be refunded?"]},
    "summarization_coverage": {"coverage": [
        {"question": "How long do refunds take?", "answered": True, "reason": "5 days."},
        {"question": "Where is the office?", "answered": True, "reason": "Munich."},
        {"question": "Can opened items be refunded?", "answered": False,
         "reason": "Not mentioned."}]},
    "summarization_reason": {"reason": "The score is 0.5 because one of the two claims is "
                                       "wrong (the office is in Berlin)."},
    "rubric_criteria": {"criteria": [
        {"criterion": "Gives the refund time", "satisfied": True, "required": True,
         "reasoning": "It says 5 days."},
        {"criterion": "Says where the money goes", "satisfied": False, "required": True,
         "reasoning": "The card is not mentioned."}], "overallAssessment": ""},
}


def geo_llm_and_judge(request: dict[str, Any]) -> Any:
    """A stub responder: GEO_ANSWER for the agent's LLM ("agent-llm"), the LLM judge's scripted
    replies, else the relevancy judge, step by step; a question about rain is off topic (verdict
    "no", score 0), any other on topic."""
    if request.get("model") == "agent-llm":
        return GEO_ANSWER
    schema = ((request.get("response_format") or {}).get("json_schema") or {}).get("name")
    if schema in RUBRIC_REPLIES:  # the LLM judge of your own criterion, bias (docs examples)
        return RUBRIC_REPLIES[schema]
    prompt = next(m["content"] for m in request["messages"] if m["role"] == "user")
    off_topic = "rain" in prompt
    if "<verdicts>" in prompt:
        if off_topic:
            return {"reason": "The score is 0 because the answer names a capital instead of the weather."}
        return {"reason": "The score is 1 because the answer names the capital."}
    if "<statements>" in prompt:
        verdict = "no" if off_topic else "yes"
        return {"results": [{"result": verdict, "reason": f"judged {verdict}"}]}
    return {"statements": [GEO_ANSWER]}


@contextmanager
def litellm_instrumented() -> Iterator[None]:
    """instrument_litellm() for the duration of the block."""
    tracescore.instrument_litellm()
    try:
        yield
    finally:
        tracescore.uninstrument_litellm()


def npm_project(folder: Path, script: str, prefix: str) -> Path:
    """`folder` (package.json, package-lock.json, `script` and the `.mjs` modules it may import)
    with its npm dependencies installed once into the cache, keyed by the lock file (offline
    afterwards); the cached script's path."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.fail(f"{folder.name} needs node and npm (apt-get install nodejs npm)")
    lock = (folder / "package-lock.json").read_bytes()
    home = cache_dir() / f"{prefix}-{hashlib.sha256(lock).hexdigest()[:16]}"
    with _file_lock(cache_dir() / f"{home.name}.lock"):
        if not (home / "node_modules" / ".tracescore-ready").exists():
            shutil.rmtree(home, ignore_errors=True)
            home.mkdir(parents=True)
            for name in ("package.json", "package-lock.json"):
                shutil.copy(folder / name, home / name)
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                           cwd=home, check=True, timeout=600)  # fmt: skip
            (home / "node_modules" / ".tracescore-ready").write_text("")
        for module in {folder / script, *folder.glob("*.mjs")}:
            shutil.copy(module, home / module.name)
    return home / script


class SeenScorer(Scorer):
    """Reports the tool calls and context it was given, as JSON in its reason."""

    id = "seen"
    name = "Seen"
    uses_judge = False

    def __init__(self) -> None:
        self.seen: dict[str, dict[str, Any]] = {}

    async def arun(self, *, input: Any, output: Any, ground_truth: Any = None,
                   run_id: str | None = None, tool_calls: Any = (), context: Any = ()
                   ) -> ScoreResult:
        seen = {"tools": [[c.name, c.arguments, c.result, c.error] for c in tool_calls],
                "context": list(context),
                "ids": [c.call_id for c in tool_calls]}
        self.seen[str(input)] = seen  # read back in process (isolation="thread")
        return ScoreResult(run_id=run_id or "r", scorer_id=self.id, scorer_name=self.name,
                           score=float(len(tool_calls)), reason=json.dumps(seen))


def live_scores(scorers: list[Any], question: str, answer: str, *, agent: str = "geo"
                ) -> dict[Any, Any]:
    """configure(scorers=...) with an in-memory exporter, one call of an agent answering
    `answer`: the score of each scorer (by id) on that call's span."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tracescore import _semconv as sc

    exporter = InMemorySpanExporter()
    handle = tracescore.configure(exporter=exporter, batch=False, scorers=scorers)
    try:
        tracescore.agent(name=agent)(lambda question: answer)(question)
        assert handle.flush(10)
    finally:
        handle.shutdown(10)
    [span] = [s for s in exporter.get_finished_spans() if s.name == f"invoke_agent {agent}"]
    return {e.attributes[sc.TS_SCORER_ID]: e.attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE]
            for e in span.events if e.name == sc.GEN_AI_EVALUATION_RESULT}


def score_command(*args: str) -> dict[str, Any]:
    """`tracescore score ARGS --json` in a child process (it must exit 0): each result by
    scorer id."""
    import sys

    done = subprocess.run([str(Path(sys.executable).parent / "tracescore"), "score", *args,
                           "--json"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return {r["scorer_id"]: r for r in json.loads(done.stdout)}
