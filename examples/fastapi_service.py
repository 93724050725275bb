"""A FastAPI chat service with online scoring and one conversation id per conversation.

Each POST /chat runs the agent; its span carries `gen_ai.conversation.id` (from the
X-Conversation-Id header, or a new id returned in the response), and is scored online in the
background — the response never waits for the judge. Spans go to $OTEL_EXPORTER_OTLP_ENDPOINT
when set, else to the console.

    pip install fastapi uvicorn
    python examples/fastapi_service.py --port 8000
    curl -s localhost:8000/chat -H 'content-type: application/json' \
         -d '{"message": "What are your opening hours?"}'
"""

from __future__ import annotations

import argparse
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar

from fastapi import FastAPI, Header
from pydantic import BaseModel

import tracescore

HOURS = "We are open from 9am to 6pm, Monday to Saturday."
ADDRESS = "Our shop is at 12 Harbour Street, next to the ferry terminal."


class ChatRequest(BaseModel):
    message: str


class ChatResponse(BaseModel):
    conversation_id: str
    answer: str


@tracescore.tool
def lookup_store_info(topic: str) -> str:
    return ADDRESS if topic == "address" else HOURS


# The conversation of the request being handled (set per request, read by the decorator).
current_conversation: ContextVar[str | None] = ContextVar("current_conversation", default=None)


@tracescore.agent(name="shop-assistant",
                  conversation_id=lambda _question: current_conversation.get())
async def shop_assistant(message: str) -> str:
    """The agent: answers questions about the shop."""
    topic = "address" if any(w in message.lower() for w in ("where", "address")) else "hours"
    return lookup_store_info(topic)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    judge = os.environ.get("TRACESCORE_JUDGE_MODEL", "tracescore/offline")
    tracescore.configure(
        service_name="shop-assistant",
        exporter="otlp" if endpoint else "console",
        scorers=[tracescore.create_answer_relevancy_scorer(model=judge)],
    )
    yield
    tracescore.shutdown()  # bounded: pending scores get a moment, then everything is exported


app = FastAPI(title="shop assistant", lifespan=lifespan)


@app.post("/chat")
async def chat(request: ChatRequest,
               x_conversation_id: str | None = Header(default=None)) -> ChatResponse:
    conversation_id = x_conversation_id or uuid.uuid4().hex
    token = current_conversation.set(conversation_id)
    try:
        answer = await shop_assistant(request.message)
    finally:
        current_conversation.reset(token)
    return ChatResponse(conversation_id=conversation_id, answer=answer)


if __name__ == "__main__":
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
