"""An async streaming agent: an async generator that calls async tools and yields tokens.

The agent span covers the whole stream; the tools are child spans; online scoring judges the
joined answer once the stream ends. Runs offline; spans go to $OTEL_EXPORTER_OTLP_ENDPOINT when
set, else to the console.

    python examples/async_streaming_agent.py
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

import tracescore

FORECASTS = {"lisbon": (24, "sunny"), "oslo": (3, "snowy"), "lima": (19, "cloudy")}


@tracescore.tool
async def find_city(question: str) -> str:
    """Pick the city the question is about."""
    await asyncio.sleep(0)  # stands in for real I/O
    return next((city for city in FORECASTS if city in question.lower()), "lisbon")


@tracescore.tool
async def get_forecast(city: str) -> dict:
    """Tomorrow's forecast for a city."""
    await asyncio.sleep(0)
    degrees, sky = FORECASTS[city]
    return {"city": city, "degrees": degrees, "sky": sky}


@tracescore.agent(name="forecast-agent")
async def forecast(question: str) -> AsyncIterator[str]:
    """Stream an answer word by word."""
    city = await find_city(question)
    report = await get_forecast(city)
    answer = (f"Tomorrow in {report['city'].title()} it will be {report['sky']}, "
              f"around {report['degrees']} degrees Celsius.")
    for word in answer.split(" "):
        await asyncio.sleep(0)
        yield word + " "


async def main() -> None:
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    judge = os.environ.get("TRACESCORE_JUDGE_MODEL", "tracescore/offline")
    tracescore.configure(
        service_name="forecast-agent",
        exporter="otlp" if endpoint else "console",
        scorers=[tracescore.create_answer_relevancy_scorer(model=judge)],
    )
    for question in ("What's the weather in Oslo tomorrow?", "Will it rain in Lima tomorrow?"):
        print(question)
        async for token in forecast(question):
            print(token, end="", flush=True)
        print()
    tracescore.flush()  # waits (bounded) for the scores, then exports


if __name__ == "__main__":
    asyncio.run(main())
