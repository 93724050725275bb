"""The agent behind `tracescore demo`, run on its own and traced to the console:

    python examples/demo_agent.py

The agent itself (a notes tool, a canned "LLM" step and six trivia questions whose answers range
from right to off topic) ships inside the package as tracescore/cli/_demo_agent.py, so that
`tracescore demo` also works from an installed wheel. `answer` is the agent: use it as an eval
target with `tracescore eval examples/trivia.jsonl --target examples/demo_agent.py:answer`.
"""

from __future__ import annotations

import tracescore
from tracescore.cli._demo_agent import QUESTIONS, answer

__all__ = ["QUESTIONS", "answer"]

if __name__ == "__main__":
    tracescore.configure(service_name="demo-agent", exporter="console")
    for item in QUESTIONS:
        print(f"{item['input']}\n  -> {answer(item['input'])}")
    tracescore.flush()
