"""The `tracescore` console script, run for real in a subprocess: demo, eval, score, errors."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tracescore import __version__
from tracescore import _semconv as sc
from tracescore.cli._otlp import read_spans
from tracescore.testing import Reply

SCRIPT = Path(sys.executable).parent / "tracescore"
ROOT = Path(__file__).resolve().parents[2]

AGENT_MODULE = '''
import asyncio

ANSWERS = {
    "What is the capital of France?": "Paris is the capital of France.",
    "Who wrote Hamlet?": "William Shakespeare wrote Hamlet.",
    "What is the tallest mountain on Earth?": "I like turtles and sunny beaches.",
}

def answer(question):
    if question == "crash":
        raise RuntimeError("the agent crashed")
    return ANSWERS[question]

async def aanswer(question):
    await asyncio.sleep(0)
    return ANSWERS[question]
'''

ROWS = [
    {"input": "What is the capital of France?", "ground_truth": "Paris is the capital of France.",
     "topic": "geography"},
    {"input": "Who wrote Hamlet?", "ground_truth": "Hamlet was written by William Shakespeare.",
     "topic": "books"},
    {"input": "What is the tallest mountain on Earth?",
     "ground_truth": "Mount Everest is the tallest mountain on Earth.", "topic": "geography"},
]


def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items()
                if not k.startswith(("OTEL_", "TRACESCORE_"))}
    full_env.update({"COLUMNS": "200", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                     "NO_COLOR": "1", "OTEL_TRACES_EXPORTER": "none"})
    full_env.update(env or {})
    return subprocess.run([str(SCRIPT), *args], cwd=cwd or ROOT, env=full_env, text=True,
                          capture_output=True, timeout=timeout, check=False)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A directory with an agent module and the dataset in three formats."""
    (tmp_path / "my_agent.py").write_text(AGENT_MODULE)
    (tmp_path / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    (tmp_path / "qa.json").write_text(json.dumps({"items": ROWS}))
    with (tmp_path / "qa.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["input", "ground_truth", "topic"])
        writer.writeheader()
        writer.writerows(ROWS)
    return tmp_path


# --- basics ----------------------------------------------------------------------------------


def test_version_and_help() -> None:
    version = run("--version")
    assert version.returncode == 0 and version.stdout.strip() == f"tracescore {__version__}"
    top = run("--help")
    assert top.returncode == 0
    for command in ("demo", "eval", "score"):
        assert command in top.stdout
    for command, needle in (("eval", "--threshold"), ("score", "--ground-truth"),
                            ("demo", "--spans-file")):
        result = run(command, "--help")
        assert result.returncode == 0 and needle in result.stdout


def test_python_dash_m_runs_the_same_command() -> None:
    result = subprocess.run([sys.executable, "-m", "tracescore", "--version"], text=True,
                            capture_output=True, timeout=60, check=False)
    assert result.returncode == 0 and result.stdout.strip() == f"tracescore {__version__}"


# --- score -----------------------------------------------------------------------------------


def test_score_prints_the_full_result_as_json() -> None:
    result = run("score", "--input", "What is the capital of France?",
                 "--output", "Paris is the capital of France.",
                 "--ground-truth", "Paris is the capital of France.", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    by_id = {r["scorer_id"]: r for r in data}
    relevancy = by_id["answer-relevancy"]
    assert relevancy["score"] == 1.0 and relevancy["label"] == "relevant"
    assert relevancy["reason"].startswith("The score is 1")
    assert relevancy["preprocess_step_result"]["statements"] == ["Paris is the capital of France."]
    assert "Paris is the capital of France." in relevancy["analyze_prompt"]
    assert relevancy["usage"]["model"] == "tracescore/offline"
    assert by_id["content-similarity"]["score"] == 1.0


def test_score_table_shows_steps_for_one_scorer() -> None:
    result = run("score", "-i", "What is the capital of France?",
                 "-o", "France is a beautiful country with great food.", "-s", "relevancy")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Answer Relevancy" in out and "content-similarity" not in out
    for field in ("score", "label", "reason", "preprocess prompt", "analyze result",
                  "reason prompt"):
        assert field in out
    assert "irrelevant" in out


def test_score_similarity_without_ground_truth_compares_with_the_input() -> None:
    result = run("score", "-i", "The quick brown fox", "-o", "the quick brown fox",
                 "-s", "similarity", "--json")
    assert result.returncode == 0, result.stderr
    (data,) = json.loads(result.stdout)
    assert data["score"] == 1.0 and data["label"] == "similar"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-i", "q", "-o", "a", "-s", "fluency"], "Invalid value for '--scorer'"),
        (["-i", "q"], "Missing option '--output'"),
    ],
)
def test_score_usage_errors_exit_2(args: list[str], message: str) -> None:
    result = run("score", *args)
    assert result.returncode == 2
    assert message.lower() in result.stderr.lower()
    assert "Traceback" not in result.stderr


# --- eval ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dataset", ["qa.jsonl", "qa.json", "qa.csv"])
def test_eval_reads_every_format_and_writes_json_results(project: Path, dataset: str) -> None:
    result = run("eval", dataset, "--target", "my_agent:answer", "--output", "out.json",
                 cwd=project)
    assert result.returncode == 0, result.stderr
    assert "3 items" in result.stdout and "answer-relevancy" in result.stdout
    data = json.loads((project / "out.json").read_text())
    assert data["summary"]["total_items"] == 3
    assert data["items"][0]["metadata"] == {"topic": "geography"}
    assert data["items"][0]["scores"]["answer-relevancy"]["score"] == 1.0
    assert data["items"][2]["scores"]["answer-relevancy"]["score"] == 0.0
    assert data["scores"]["content-similarity"] == pytest.approx(
        sum(i["scores"]["content-similarity"]["score"] for i in data["items"]) / 3)


def test_eval_threshold_gates_the_exit_code(project: Path) -> None:
    passing = run("eval", "qa.jsonl", "-t", "my_agent:answer", "-s", "relevancy",
                  "--threshold", "relevancy=0.5", cwd=project)
    failing = run("eval", "qa.jsonl", "-t", "my_agent:answer", "-s", "relevancy",
                  "--threshold", "relevancy=0.9", cwd=project)
    assert passing.returncode == 0, passing.stderr
    assert "PASSED" in passing.stdout
    assert failing.returncode == 1, failing.stderr
    assert "FAILED" in failing.stdout and "answer-relevancy mean 0.667 < 0.9" in failing.stdout


def test_eval_csv_output_and_file_target_and_async_function(project: Path) -> None:
    result = run("eval", str(project / "qa.jsonl"), "--target",
                 f"{project / 'my_agent.py'}:aanswer", "-s", "similarity", "-c", "2",
                 "--output", str(project / "results" / "out.csv"), "--no-items")
    assert result.returncode == 0, result.stderr
    with (project / "results" / "out.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["input"] for r in rows] == [r["input"] for r in ROWS]
    assert float(rows[0]["content-similarity.score"]) == 1.0
    assert rows[0]["content-similarity.label"] == "similar"
    assert "answer-relevancy.score" not in rows[0]


def test_eval_reports_a_failing_item_and_keeps_the_others(project: Path) -> None:
    rows = [*ROWS[:2], {"input": "crash"}]
    (project / "mixed.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = run("eval", "mixed.jsonl", "-t", "my_agent:answer", "-o", "out.json", cwd=project)
    assert result.returncode == 0, result.stderr
    assert "Failures" in result.stdout and "the agent crashed" in result.stdout
    data = json.loads((project / "out.json").read_text())
    assert data["summary"]["errored_items"] == 1
    assert data["failures"][0]["step"] == "target"
    assert data["items"][0]["scores"]["answer-relevancy"]["score"] == 1.0


def test_eval_exports_item_spans_with_scores(project: Path, otlp_receiver) -> None:
    spans_file = project / "spans.jsonl"
    result = run("eval", "qa.jsonl", "-t", "my_agent:answer", "--name", "qa-bot",
                 "--spans-file", str(spans_file), cwd=project,
                 env={"OTEL_EXPORTER_OTLP_ENDPOINT": otlp_receiver.http_endpoint})
    assert result.returncode == 0, result.stderr
    received = otlp_receiver.wait_for_spans(3)
    assert {s.name for s in received} == {"invoke_agent qa-bot"}
    from_file = read_spans(spans_file)
    assert {s.span_id for s in from_file} == {s.span_id for s in received}
    for span in received:
        scores = {e.attributes[sc.TS_SCORER_ID] for e in span.events
                  if e.name == sc.GEN_AI_EVALUATION_RESULT}
        assert scores == {"answer-relevancy", "content-similarity"}


@pytest.mark.parametrize(
    ("files", "args", "message"),
    [
        ({}, ["missing.jsonl"], "missing.jsonl: no such file"),
        ({"bad.jsonl": '{"input": "a"}\n\n{"input": oops}\n'}, ["bad.jsonl"],
         "bad.jsonl, line 3: invalid JSON"),
        ({"bad.jsonl": '{"input": "a"}\n{"question": "b"}\n'}, ["bad.jsonl"],
         "bad.jsonl, line 2: missing the 'input' key"),
        ({"bad.csv": "question,answer\nq,a\n"}, ["bad.csv"], "header needs an 'input' column"),
        ({"bad.csv": "input,ground_truth\nq,a\nq2,a2,extra\n"}, ["bad.csv"],
         "bad.csv, line 3: more values than header columns"),
        ({"bad.json": '{"rows": []}'}, ["bad.json"], "expected a list of items"),
        ({"data.txt": "input\n"}, ["data.txt"], "unknown dataset format '.txt'"),
        ({}, ["qa.jsonl", "-t", "no_such_module:answer"],
         "cannot import target 'no_such_module:answer': ModuleNotFoundError"),
        ({}, ["qa.jsonl", "-t", "my_agent:nothing_here"], "cannot find 'nothing_here'"),
        ({}, ["qa.jsonl", "-t", "my_agent"], "write it as module:function"),
        ({}, ["qa.jsonl", "--threshold", "relevancy"], "write it as SCORER=MIN"),
        ({}, ["qa.jsonl", "--threshold", "fluency=0.5"], "unknown scorer 'fluency'"),
        ({}, ["qa.jsonl", "-s", "similarity", "--threshold", "relevancy=0.5"],
         "--threshold for a scorer that does not run: answer-relevancy"),
        ({}, ["qa.jsonl", "-o", "out.xlsx"], "--output must end in .json or .csv"),
        ({}, ["qa.jsonl", "-s", "bleu"], "Invalid value for '--scorer'"),
        ({}, ["qa.jsonl", "-c", "0"], "Invalid value for '--concurrency'"),
        ({}, ["qa.jsonl", "--judge-model", "no-such-provider/model-x"],
         "unknown judge model 'no-such-provider/model-x'"),
    ],
)
def test_eval_bad_input_exits_2_with_a_clear_message(project: Path, files: dict[str, str],
                                                     args: list[str], message: str) -> None:
    for name, text in files.items():
        (project / name).write_text(text)
    if "-t" not in args:
        args = [*args, "-t", "my_agent:answer"]
    result = run("eval", *args, cwd=project)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert message.lower() in result.stderr.lower()
    assert "Traceback" not in result.stderr


# --- demo ------------------------------------------------------------------------------------


def test_demo_prints_each_call_with_scores_read_back_from_the_export(tmp_path: Path,
                                                                      otlp_receiver) -> None:
    spans_file = tmp_path / "demo.jsonl"
    result = run("demo", "--spans-file", str(spans_file), cwd=tmp_path,
                 env={"OTEL_EXPORTER_OTLP_ENDPOINT": otlp_receiver.http_endpoint})
    assert result.returncode == 0, result.stderr
    out = result.stdout

    from_file = read_spans(spans_file)
    agents = [s for s in from_file if s.name == "invoke_agent trivia-agent"]
    assert len(agents) == 6
    assert {s.name for s in from_file} >= {"execute_tool search_notes", "chat demo-llm"}
    for span in agents:  # every call carries both scores, exported in the file
        scored = {e[sc.TS_SCORER_ID] for name, e in span.events
                  if name == sc.GEN_AI_EVALUATION_RESULT and sc.GEN_AI_EVALUATION_SCORE_VALUE in e}
        assert scored == {"answer-relevancy", "content-similarity"}
    labels = {e[sc.GEN_AI_EVALUATION_SCORE_LABEL] for s in agents for name, e in s.events
              if name == sc.GEN_AI_EVALUATION_RESULT
              and e[sc.TS_SCORER_ID] == "answer-relevancy"}
    assert labels == {"relevant", "partially_relevant", "irrelevant"}  # a real mix

    assert f"Read back from {spans_file}" in out
    # the offline judge says what it is good for and what it is not
    assert "does not understand meaning" in " ".join(out.split())
    assert out.count("invoke_agent trivia-agent") == 6
    assert "What is the capital of France?" in out
    assert "score Answer Relevancy: 1.00 (relevant) — The score is 1" in out
    assert "(irrelevant)" in out and "(partially_relevant)" in out
    assert "execute_tool search_notes" in out

    received = otlp_receiver.wait_for_spans(len(from_file))  # the same spans reached OTLP
    assert {s.span_id for s in received} == {s.span_id for s in from_file}


def test_demo_runs_from_an_installed_package_outside_the_checkout(tmp_path: Path) -> None:
    """The package alone, as a wheel installs it (no examples/ beside it), runs the demo."""
    site = tmp_path / "site-packages"
    shutil.copytree(ROOT / "tracescore", site / "tracescore",
                    ignore=shutil.ignore_patterns("__pycache__"))
    work = tmp_path / "elsewhere"
    work.mkdir()
    result = run("demo", "--spans-file", "demo.jsonl", cwd=work, env={"PYTHONPATH": str(site)})
    assert result.returncode == 0, result.stderr
    agent_file = site / "tracescore" / "cli" / "_demo_agent.py"
    assert f"Agent: trivia-agent ({agent_file})" in result.stdout  # the copy, not the checkout
    agents = [s for s in read_spans(work / "demo.jsonl") if s.name == "invoke_agent trivia-agent"]
    assert len(agents) == 6


def test_demo_overwrites_its_spans_file(tmp_path: Path) -> None:
    spans_file = tmp_path / "demo.jsonl"
    spans_file.write_text("not json, left from an older run\n")
    result = run("demo", "--spans-file", str(spans_file), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert len([s for s in read_spans(spans_file) if s.name.startswith("invoke_agent")]) == 6


def test_demo_with_an_unknown_judge_model_exits_2(tmp_path: Path) -> None:
    result = run("demo", "--spans-file", str(tmp_path / "d.jsonl"), cwd=tmp_path,
                 env={"TRACESCORE_JUDGE_MODEL": "no-such-provider/model-x"})
    assert result.returncode == 2
    assert "unknown judge model 'no-such-provider/model-x'" in result.stderr
    assert "Traceback" not in result.stderr
    assert "Provider List" not in result.stdout  # litellm's banner stays quiet


def _stub_judge(request) -> Reply:
    """Plays a judge model: one statement, judged relevant, explained (by response schema)."""
    schema = request["response_format"]["json_schema"]["name"]
    if schema.endswith("statements"):
        return Reply(content={"statements": ["The whole answer."]})
    if schema.endswith("verdicts"):
        return Reply(content={"results": [{"result": "yes", "reason": "On topic."}]})
    return Reply(content={"reason": "The score is 1 because the stub judge found it on topic."})


def test_a_failing_judge_prints_one_error_and_no_litellm_banner(stub_llm) -> None:
    for _ in range(4):  # the first call and the judge's three retries
        stub_llm.enqueue_error(500, "the judge broke")
    result = run("score", "-i", "Capital of France?", "-o", "Paris.", "-s", "relevancy",
                 "--judge-model", "openai/stub-judge",
                 env={"OPENAI_API_BASE": stub_llm.base_url, "OPENAI_API_KEY": "sk-test"})
    assert result.returncode == 1, result.stderr
    assert "failed at step 'preprocess'" in result.stderr and "HTTP 500" in result.stderr
    assert len(stub_llm.requests) == 4
    assert "Give Feedback" not in result.stdout + result.stderr
    assert "Traceback" not in result.stderr


def test_demo_with_a_real_judge_model_over_http(tmp_path: Path, stub_llm) -> None:
    stub_llm.responder = _stub_judge
    result = run("demo", "--spans-file", str(tmp_path / "d.jsonl"), "--judge-model",
                 "openai/stub-judge", cwd=tmp_path,
                 env={"OPENAI_API_BASE": stub_llm.base_url, "OPENAI_API_KEY": "sk-test"})
    assert result.returncode == 0, result.stderr
    assert "Judge: openai/stub-judge" in result.stdout
    assert result.stdout.count("The score is 1 because the stub judge found it on topic.") == 6
    assert len(stub_llm.requests) == 6 * 3  # three judge steps per call
    assert {r["model"] for r in stub_llm.requests} == {"stub-judge"}
