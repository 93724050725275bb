"""An agent that calls a chat model through litellm, traced and scored online.

`instrument_litellm()` turns every `litellm.completion` call into a `chat {model}` span (model,
tokens, cost, messages) under the agent's span. As it stands it runs offline: with neither
LLM_MODEL nor LLM_API_BASE set, litellm answers with a canned reply (`mock_response`). Point it
at any OpenAI-compatible server, or name a provider's model:

    LLM_API_BASE=http://localhost:11434/v1 LLM_MODEL=openai/llama3.2 python examples/litellm_agent.py
    LLM_MODEL=openai/gpt-4o-mini OPENAI_API_KEY=sk-... python examples/litellm_agent.py

LLM_API_KEY is the key sent to LLM_API_BASE (default: a placeholder, for local servers that need
none); without LLM_API_BASE litellm reads the provider's own variable (OPENAI_API_KEY, ...).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no cost-map download at import

import litellm

import tracescore

MODEL = os.environ.get("LLM_MODEL", "openai/gpt-4o-mini")
API_BASE = os.environ.get("LLM_API_BASE")  # e.g. a local vLLM / Ollama / proxy server
API_KEY = os.environ.get("LLM_API_KEY") or ("no-key" if API_BASE else None)
OFFLINE = not (API_BASE or os.environ.get("LLM_MODEL"))
CANNED = "Spring, for the cherry blossoms, or autumn, for the red maple leaves."


@tracescore.agent(name="travel-agent")
def plan(question: str) -> str:
    """Ask the model, with a short system prompt."""
    response = litellm.completion(
        model=MODEL,
        messages=[
            {"role": "system", "content": "You are a concise travel assistant."},
            {"role": "user", "content": question},
        ],
        api_base=API_BASE,
        api_key=API_KEY,
        mock_response=CANNED if OFFLINE else None,
    )
    return response.choices[0].message.content


def main() -> None:
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    judge = os.environ.get("TRACESCORE_JUDGE_MODEL", "tracescore/offline")
    tracescore.configure(
        service_name="travel-agent",
        exporter="otlp" if endpoint else "console",
        scorers=[tracescore.create_answer_relevancy_scorer(model=judge)],
    )
    tracescore.instrument_litellm()
    print(plan("What is a good time of year to visit Kyoto?"))
    tracescore.flush()


if __name__ == "__main__":
    main()
