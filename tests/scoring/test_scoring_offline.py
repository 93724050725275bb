"""The offline judge: the whole relevancy pipeline with no network, deterministic verdicts."""

from __future__ import annotations

import socket
import subprocess
import sys
from typing import Any

import pytest

from tracescore import AnswerRelevancyScorer, OfflineJudge, create_answer_relevancy_scorer
from tracescore.scoring._offline import split_statements

QUESTION = "What is the capital of France?"


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: socket.socket, address: Any) -> None:
        raise AssertionError(f"the offline judge tried to connect to {address!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


@pytest.fixture
def scorer(no_network: None) -> AnswerRelevancyScorer:
    return create_answer_relevancy_scorer(model="tracescore/offline")


@pytest.mark.parametrize(("output", "expected"), [
    ("Paris is the capital of France.", 1.0),
    ("Paris", 1.0),
    ("Paris is the capital of France. Berlin is the capital of Germany. I enjoy cooking pasta.",
     0.43),
    ("Berlin is the capital of Germany.", 0.3),
    ("France is a beautiful country with great food and culture.", 0.0),
    ("", 0.0),
])
def test_reference_examples(scorer: AnswerRelevancyScorer, output: str, expected: float) -> None:
    result = scorer.run(input=QUESTION, output=output)
    assert result.score == expected
    assert result.usage.model == "tracescore/offline"
    assert result.reason.startswith(f"The score is {expected:g} because")


def test_full_pipeline_is_recorded(scorer: AnswerRelevancyScorer) -> None:
    output = "Paris is the capital of France. Berlin is the capital of Germany. I enjoy cooking pasta."
    result = scorer.run(input=QUESTION, output=output)
    assert result.preprocess_step_result == {"statements": [
        "Paris is the capital of France.", "Berlin is the capital of Germany.",
        "I enjoy cooking pasta."]}
    assert [r["result"] for r in result.analyze_step_result["results"]] == ["yes", "unsure", "no"]
    assert all(r["reason"] for r in result.analyze_step_result["results"])
    assert f"<output>\n{output}\n</output>" in result.preprocess_prompt
    assert f"<question>\n{QUESTION}\n</question>" in result.analyze_prompt
    assert "The score is 0.43 because" in result.generate_reason_prompt
    assert result.reason == ("The score is 0.43 because 1 of 3 statements directly address the "
                             "question, 1 is only partly relevant and 1 is off-topic (offline "
                             "judge: word overlap, no language model).")
    usage = result.usage
    assert (usage.model, usage.calls, usage.input_tokens, usage.cost_usd) == (
        "tracescore/offline", 3, 0, 0.0)


def test_deterministic(scorer: AnswerRelevancyScorer) -> None:
    output = "Paris. It has been the capital since the 10th century. The food is great."
    first, second = (scorer.run(input=QUESTION, output=output).to_dict() for _ in range(2))
    for data in (first, second):
        data.pop("run_id")
        for usage in (data["usage"], *data["step_usage"].values()):
            usage.pop("latency_ms")
    assert first == second


def test_without_ground_truth_it_does_not_check_facts(scorer: AnswerRelevancyScorer) -> None:
    """Word overlap alone cannot tell a wrong capital from the right one (documented limitation)."""
    wrong = scorer.run(input=QUESTION, output="Lyon is the capital of France.")
    right = scorer.run(input=QUESTION, output="Paris is the capital of France.")
    assert wrong.score == right.score == 1.0
    assert "reference_knowledge" not in wrong.analyze_step_result
    assert "ground truth" not in wrong.reason


PARIS = "Paris is the capital of France."


@pytest.mark.parametrize(("question", "output", "ground_truth", "expected"), [
    (QUESTION, "Lyon is the capital of France.", PARIS, 0.3),
    (QUESTION, "Paris is the capital of France.", PARIS, 1.0),
    (QUESTION, "Paris", PARIS, 1.0),
    (QUESTION, "Lyon", PARIS, 0.3),
    ("What is the capital of Australia?", "Sydney is the capital of Australia.",
     "Canberra is the capital of Australia.", 0.3),
    ("How many moons does Mars have?", "Mars has three moons.", "Mars has two moons.", 0.3),
    ("How many moons does Mars have?", "Mars has 2 moons.",
     "Mars has two moons, Phobos and Deimos.", 1.0),  # "2" is "two"
    ("At what temperature does water boil at sea level?",
     "Water boils at 90 degrees Celsius at sea level.",
     "Water boils at 100 degrees Celsius at sea level.", 0.3),
    ("When did the Berlin Wall fall?", "In 1989.", "It fell on 9 November 1989.", 1.0),
    ("When did the Berlin Wall fall?", "In 1990.", "It fell on 9 November 1989.", 0.3),
    ("Who wrote Hamlet?", "William Shakespeare wrote Hamlet.",
     "Hamlet was written by William Shakespeare.", 1.0),
    # nothing to compare: no names or numbers in the answer, or none in the ground truth
    ("How do I reset my password?", "Open the settings page and choose reset password.",
     "Go to Settings and click Reset password.", 1.0),
    ("Is Python dynamically typed?", "Yes, it is.", "Yes.", 1.0),
    # only `yes` verdicts are checked: the partial and off-topic ones keep their verdicts
    (QUESTION, ("Paris is the capital of France. Berlin is the capital of Germany. "
                "I enjoy cooking pasta."), PARIS, 0.43),
])
def test_ground_truth_is_the_offline_judges_world_knowledge(
        scorer: AnswerRelevancyScorer, question: str, output: str, ground_truth: str,
        expected: float) -> None:
    result = scorer.run(input=question, output=output, ground_truth=ground_truth)
    assert result.score == expected
    assert result.analyze_step_result["reference_knowledge"]["source"] == "ground_truth"


def test_an_answer_that_disagrees_with_the_ground_truth_is_unsure_and_says_why(
        scorer: AnswerRelevancyScorer) -> None:
    result = scorer.run(input=QUESTION, output="Lyon is the capital of France.",
                        ground_truth=PARIS)
    [verdict] = result.analyze_step_result["results"]
    assert verdict["result"] == "unsure"
    assert "'Lyon'" in verdict["reason"] and "'Paris'" in verdict["reason"]
    assert "disagrees with the reference answer" in verdict["reason"]
    knowledge = result.analyze_step_result["reference_knowledge"]
    assert knowledge["answer_terms"] == ["Paris"] and "heuristic" in knowledge["note"]
    assert result.reason == (
        "The score is 0.3 because 0 of 1 statement directly addresses the question and 1 is on "
        "topic but disagrees with the reference answer (offline judge: word overlap, answers "
        "checked against the ground truth, no language model).")


def test_ground_truth_in_other_shapes(scorer: AnswerRelevancyScorer) -> None:
    messages = [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": PARIS}]
    for ground_truth in (messages, {"text": PARIS}):
        result = scorer.run(input=QUESTION, output="Lyon", ground_truth=ground_truth)
        assert result.score == 0.3
    # no usable text: scored as without a ground truth, not an error
    for unusable in ("", "   ", object(), {"a": 1, "b": 2}):
        result = scorer.run(input=QUESTION, output="Lyon", ground_truth=unusable)
        assert result.score == 1.0
        assert "reference_knowledge" not in result.analyze_step_result


def test_judge_objects_receive_the_ground_truth_as_reference(no_network: None) -> None:
    seen: list[tuple[str, str | None]] = []

    class RecordingJudge(OfflineJudge):
        async def judge(self, request):
            seen.append((request.step, request.reference))
            return await super().judge(request)

    scorer = AnswerRelevancyScorer(model=RecordingJudge())
    scorer.run(input=QUESTION, output="Lyon", ground_truth=PARIS)
    assert [reference for _, reference in seen] == [PARIS] * 3
    seen.clear()
    scorer.run(input=QUESTION, output="Lyon")
    assert [reference for _, reference in seen] == [None] * 3


@pytest.mark.parametrize(("question", "output", "verdicts"), [
    ("How do I reset my password?",
     "Open the settings page and choose reset password. Our office is in Berlin.",
     ["yes", "no"]),
    ("Is Python dynamically typed?", "Yes, it is.", ["yes"]),
    ("How many legs does a spider have?", "Eight.", ["yes"]),
    ("When did the Berlin Wall fall?", "In 1989.", ["yes"]),
    ("Who wrote Hamlet?", "William Shakespeare wrote Hamlet around 1600.", ["yes"]),
    ("Who wrote Hamlet?", "Hamlet is a tragedy set in Denmark.", ["no"]),  # subject, not author
    ("What is your favourite colour?", "Blue.", ["unsure"]),
    ("What is the capital of France?", "Paris. Nice food.", ["yes", "no"]),  # bare answer first
    ("Which river flows through Vienna?",
     "The Danube flows through Vienna. The Rhine flows through Basel. Vienna has coffee houses.",
     ["yes", "unsure", "no"]),
])
def test_verdicts(scorer: AnswerRelevancyScorer, question: str, output: str,
                  verdicts: list[str]) -> None:
    result = scorer.run(input=question, output=output)
    assert [r["result"] for r in result.analyze_step_result["results"]] == verdicts


def test_judge_object_and_model_string_are_the_same_judge(no_network: None) -> None:
    by_object = AnswerRelevancyScorer(model=OfflineJudge())
    by_name = create_answer_relevancy_scorer(model="tracescore/offline")
    assert by_object.model == by_name.model == "tracescore/offline"
    a = by_object.run(input=QUESTION, output="Paris")
    b = by_name.run(input=QUESTION, output="Paris")
    assert (a.score, a.reason) == (b.score, b.reason)


async def test_arun(scorer: AnswerRelevancyScorer) -> None:
    result = await scorer.arun(input=QUESTION, output="Paris")
    assert result.score == 1.0


@pytest.mark.parametrize(("text", "statements"), [
    ("One. Two! Three?", ["One.", "Two!", "Three?"]),
    ("- first item\n- second item\n\n3. third", ["first item", "second item", "third"]),
    ("Use e.g. a fork. Then eat.", ["Use e.g. a fork.", "Then eat."]),
    ("It costs 3.50 euros.", ["It costs 3.50 euros."]),
    ("   \n ", []),
])
def test_sentence_splitting(text: str, statements: list[str]) -> None:
    assert split_statements(text) == statements


def test_offline_scoring_never_imports_litellm() -> None:
    code = (
        "import sys, tracescore\n"
        "s = tracescore.create_answer_relevancy_scorer(model='tracescore/offline')\n"
        "r = s.run(input='What is the capital of France?', output='Paris')\n"
        "assert r.score == 1.0, r\n"
        "assert 'litellm' not in sys.modules and 'rapidfuzz' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_sync_run_from_many_threads_at_once(scorer: AnswerRelevancyScorer) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: scorer.run(input=QUESTION, output="Paris"), range(16)))
    assert [r.score for r in results] == [1.0] * 16
    assert len({r.run_id for r in results}) == 16


def test_sync_run_nested_inside_a_judge_on_the_scoring_loop(no_network: None) -> None:
    """A judge that itself calls a scorer's blocking run() (on tracescore's loop) still finishes."""
    inner = create_answer_relevancy_scorer(model="tracescore/offline")

    class NestingJudge(OfflineJudge):
        model = "test/nesting"

        async def judge(self, request):
            assert inner.run(input=QUESTION, output="Paris").score == 1.0
            return await super().judge(request)

    outer = AnswerRelevancyScorer(model=NestingJudge())
    result = outer.run(input=QUESTION, output="Paris")
    assert result.score == 1.0 and result.usage.model == "test/nesting"


def test_sync_run_in_a_forked_child(scorer: AnswerRelevancyScorer) -> None:
    import os

    scorer.run(input=QUESTION, output="Paris")  # the parent's scoring loop is running
    pid = os.fork()
    if pid == 0:  # child: a fresh scoring loop must be started
        ok = False
        try:
            ok = scorer.run(input=QUESTION, output="Paris").score == 1.0
        finally:  # the child never returns into pytest, even when run() raises
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
