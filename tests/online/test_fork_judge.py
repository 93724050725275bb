"""fork() with in-thread scoring: a child that exits normally leaves the parent's judge working.

litellm's cached clients are the parent's in a forked child; closing them at the child's exit
unregistered the parent's sockets from the epoll instance both share, and the parent's next
judge call hung until its timeout. The app runs as a real script (a subprocess), the judge is
real litellm against the stub, and every score is read back through the OTLP receiver.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from _helpers import SCORING_BUDGET_S

from tracescore import _semconv as sc
from tracescore.testing import OTLPReceiver, StubLLMServer

APP = """
import os, sys
import tracescore

tracescore.configure(exporter="otlp-http", endpoint={endpoint!r},
                     online={{"isolation": "thread", "max_wait_s": {budget}}},
                     scorers=[tracescore.create_answer_relevancy_scorer(
                         model="openai/judge-stub", api_base={api_base!r}, api_key="sk-test",
                         timeout=5, max_retries=0)])

@tracescore.agent(name="geo")
def geo(question):
    return "Paris."

geo("parent before fork?")
assert tracescore.flush({budget})
for n in range({children}):
    pid = os.fork()
    if pid == 0:
        if {child_scores}:
            geo("child " + str(n) + "?")
            tracescore.flush({budget})
        {child_exit}
    os.waitpid(pid, 0)
    geo("parent after child " + str(n) + "?")
    assert tracescore.flush({budget})
print("done")
"""

EXITS = {
    "sys.exit": "sys.exit(0)",
    "end of script": "print('child'); sys.stdout.flush(); break",
}


def _by_step(request: Any) -> dict[str, Any]:
    prompt = next(m["content"] for m in request["messages"] if m["role"] == "user")
    if "<verdicts>" in prompt:
        return {"reason": "The score is 1 because it answers."}
    if "<statements>" in prompt:
        return {"results": [{"result": "yes", "reason": "answers it"}]}
    return {"statements": ["Paris."]}


@pytest.mark.parametrize(("exit_kind", "child_scores"), [("sys.exit", True),
                                                        ("end of script", False)])
def test_a_forked_child_exiting_normally_leaves_the_parents_judge_working(
        tmp_path: Any, otlp_receiver: OTLPReceiver, stub_llm: StubLLMServer, exit_kind: str,
        child_scores: bool) -> None:
    stub_llm.responder = _by_step
    children = 2
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent(APP).format(
        endpoint=otlp_receiver.http_endpoint, api_base=stub_llm.base_url, children=children,
        child_scores=child_scores, child_exit=EXITS[exit_kind], budget=SCORING_BUDGET_S))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACESCORE_"))}
    done = subprocess.run([sys.executable, str(app)], env=env, capture_output=True, text=True,
                          timeout=3 * SCORING_BUDGET_S, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "done" in done.stdout

    expected = 1 + children + (children if child_scores else 0)
    spans = otlp_receiver.wait_for_spans(expected, timeout=30)
    scores: dict[str, Any] = {}
    for span in spans:
        question = next(str(v) for k, v in span.attributes.items()
                        if k == sc.GEN_AI_INPUT_MESSAGES)
        results = [dict(e.attributes) for e in span.events
                   if e.name == sc.GEN_AI_EVALUATION_RESULT]
        scores[question] = [(r.get(sc.GEN_AI_EVALUATION_SCORE_VALUE), r.get(sc.ERROR_TYPE))
                            for r in results]
    parents = {q: v for q, v in scores.items() if "parent" in q}
    assert len(parents) == 1 + children
    assert all(v == [(1.0, None)] for v in parents.values()), parents
    if child_scores:
        children_scores = {q: v for q, v in scores.items() if "child" in q and "parent" not in q}
        assert all(v == [(1.0, None)] for v in children_scores.values()), children_scores
