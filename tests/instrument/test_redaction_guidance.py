"""Redaction hides what came from the user's data, never tracescore's own guidance: every text the
product writes (its string literals, docstrings aside) comes out of the redaction rules as it
went in; a placeholder (`api_key=...`, `token=<TOKEN>`, `password=***`) is no secret, while a real
value beside it is still hidden (generated cases); and a judge without its key fails with the
guidance intact on the result event."""

from __future__ import annotations

import ast
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from _helpers import shut_down_pipelines
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore._content import redact

PACKAGE = Path(tracescore.__file__).parent


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _product_texts() -> Iterator[tuple[str, int, str]]:
    """(file, line, text) of each string the package may print or record (an f-string with its
    fields as `{x}`)."""
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        skip = _docstrings(tree)
        inner = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)
                 for v in node.values}
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                text = "".join(str(v.value) if isinstance(v, ast.Constant) else "{x}"
                               for v in node.values)
            elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and id(node) not in skip and id(node) not in inner):
                text = node.value
            else:
                continue
            yield str(path.relative_to(PACKAGE)), node.lineno, text


def test_no_text_of_the_product_is_changed_by_redaction() -> None:
    texts = list(_product_texts())
    assert len(texts) > 1000
    changed = [(where, line, text) for where, line, text in texts
               if "_secret_rules" not in where and redact(text) != text]
    assert changed == []


NAMES = st.sampled_from(["api_key", "OPENAI_API_KEY", "password", "token", "secret",
                         "client_secret", "x-api-key"])
PLACEHOLDERS = st.sampled_from(["...", "…", "***", "xxxx", "<TOKEN>", "<your key>",
                                "{password}", '"..."'])
SECRETS = st.from_regex(r"sk-[A-Za-z0-9]{20,30}|[A-Za-z0-9!#%]{8,16}\d", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(name=NAMES, placeholder=PLACEHOLDERS, other=NAMES, secret=SECRETS,
       op=st.sampled_from(["=", ": ", " = "]))
def test_a_placeholder_is_kept_and_a_real_value_beside_it_is_hidden(
        name: str, placeholder: str, other: str, secret: str, op: str) -> None:
    guidance = f"(set it in the environment, or pass {name}{op}{placeholder})"
    text = f"provider said: bad {other}{op}{secret}; {guidance}"  # a value runs to a stop
    redacted = redact(text)
    assert secret not in redacted
    assert redacted.endswith(guidance)


@pytest.fixture
def no_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    yield
    shut_down_pipelines()


def test_a_judge_without_its_key_fails_with_the_guidance_intact(
        no_key: None, caplog: pytest.LogCaptureFixture) -> None:
    exporter = InMemorySpanExporter()

    @tracescore.agent(name="geo")
    def geo(question: str) -> str:
        return "Paris"

    with caplog.at_level(logging.WARNING, logger="tracescore"):
        handle = tracescore.configure(exporter=exporter, batch=False, scorers=[
            tracescore.create_answer_relevancy_scorer(model="openai/gpt-4o-mini")],
            online={"isolation": "thread"})
    geo("Capital of France?")
    handle.shutdown(30)
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent geo"]
    texts = [json.dumps(dict(e.attributes or {})) for e in span.events]
    assert any("or pass api_key=...)" in text for text in texts), texts
    assert not any("REDACTED" in text for text in texts), texts
    logged = [r.getMessage() for r in caplog.records]
    assert any("or pass api_key=...)" in m for m in logged) and not any(
        "REDACTED" in m for m in logged)
