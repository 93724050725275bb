"""Trace and score an agent class you cannot edit: `instrument_agent(SupportBot, "run")`.

Every `SupportBot.run` call (all instances) becomes an `invoke_agent support-bot` span, scored
online like a decorated agent; `uninstrument_agent` undoes it. Runs offline.

    python examples/instrument_existing_agent.py
"""

from __future__ import annotations

import os

from support_bot_lib import SupportBot  # the "third-party" class, unchanged

import tracescore


def main() -> None:
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    judge = os.environ.get("TRACESCORE_JUDGE_MODEL", "tracescore/offline")
    tracescore.configure(
        service_name="support-bot",
        exporter="otlp" if endpoint else "console",
        scorers=[tracescore.create_answer_relevancy_scorer(model=judge)],
    )
    tracescore.instrument_agent(SupportBot, "run", name="support-bot")

    bot = SupportBot()
    for question in ("How long does shipping take?", "Can I get a refund?",
                     "What's your favourite colour?"):
        print(f"{question}\n  -> {bot.run(question)}")

    tracescore.uninstrument_agent(SupportBot, "run")
    bot.run("This call is not traced any more.")
    tracescore.flush()


if __name__ == "__main__":
    main()
