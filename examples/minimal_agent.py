"""A minimal traced agent: one agent, one tool, one LLM call through litellm — offline, no API key.

    python examples/minimal_agent.py                          # spans printed to the console
    python examples/minimal_agent.py --exporter file --file spans.jsonl
    python examples/minimal_agent.py --exporter otlp-http --endpoint http://localhost:4318

The LLM call uses litellm's `mock_response`, so nothing leaves the machine; swap in a real model to
trace real calls.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch of the price map

import tracescore


@tracescore.tool
def weather(city: str) -> str:
    """A tool: canned weather report."""
    return f"It is sunny in {city}, 24 degrees."


@tracescore.agent(name="weather-bot")
def answer(question: str) -> str:
    """The agent: calls its tool, then asks the LLM to phrase the answer."""
    import litellm

    report = weather("Paris")
    reply = litellm.completion(
        model="openai/gpt-4o-mini",
        messages=[{"role": "system", "content": "Answer in one sentence."},
                  {"role": "user", "content": f"{question}\nWeather report: {report}"}],
        mock_response="Paris is sunny today at 24 degrees.",
    )
    return reply.choices[0].message.content


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exporter", default="console",
                        choices=["console", "file", "otlp", "otlp-http", "otlp-grpc", "none"])
    parser.add_argument("--file", default="spans.jsonl", help='output of --exporter file')
    parser.add_argument("--endpoint", default=None, help="OTLP endpoint (default: OTEL_* env vars)")
    args = parser.parse_args()

    handle = tracescore.configure(
        service_name="minimal-agent",
        exporter=args.exporter,
        file_path=args.file if args.exporter == "file" else None,
        endpoint=args.endpoint,
    )
    tracescore.instrument_litellm()
    print(answer("What is the weather in Paris?"))
    handle.shutdown()  # flush; interpreter exit would do it too
    if args.exporter == "file":
        print(f"spans written to {args.file}")


if __name__ == "__main__":
    main()
