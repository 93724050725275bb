"""The agent behind `tracescore demo`: a small trivia agent with a tool and an LLM step.

It runs offline and is deterministic: the "LLM" is a canned lookup, so the demo needs no API key.
Some answers are good, one is partly right, one is wrong but on topic, one is off topic — so the
scores differ. It ships inside the package so `tracescore demo` works from an installed wheel;
examples/demo_agent.py runs it on its own.
"""

from __future__ import annotations

import tracescore

# What the agent's notes tool knows (keyword of the question -> note).
NOTES = {
    "france": "France: capital Paris; population about 68 million.",
    "hamlet": "Hamlet: tragedy by William Shakespeare, written around 1600.",
    "water": "Water: boils at 100 degrees Celsius at sea level.",
    "mars": "Mars: fourth planet from the Sun; two moons, Phobos and Deimos.",
    "australia": "Australia: capital Canberra; largest city Sydney.",
    "mountain": "Mount Everest: 8,849 metres, the highest mountain above sea level.",
}

# The canned replies of the demo's "LLM" (keyword of the question -> reply).
REPLIES = {
    "france": "Paris is the capital of France.",
    "hamlet": "William Shakespeare wrote Hamlet.",
    "water": "Water boils at 100 degrees Celsius at sea level.",
    "mars": "Mars has two moons. Mars is the fourth planet from the Sun, and iron oxide "
            "dust makes it red.",  # half on topic
    "australia": "Sydney is the capital of Australia.",  # wrong, but on topic
    "mountain": "I enjoy hiking on weekends, and the weather looks sunny.",  # off topic
}

QUESTIONS: list[dict[str, str]] = [
    {"input": "What is the capital of France?",
     "ground_truth": "Paris is the capital of France."},
    {"input": "Who wrote Hamlet?",
     "ground_truth": "Hamlet was written by William Shakespeare."},
    {"input": "At what temperature does water boil at sea level?",
     "ground_truth": "Water boils at 100 degrees Celsius at sea level."},
    {"input": "How many moons does Mars have?",
     "ground_truth": "Mars has two moons, Phobos and Deimos."},
    {"input": "What is the capital of Australia?",
     "ground_truth": "Canberra is the capital of Australia."},
    {"input": "What is the tallest mountain on Earth?",
     "ground_truth": "Mount Everest is the tallest mountain on Earth."},
]


def _topic(text: str) -> str:
    lowered = text.lower()
    return next((key for key in NOTES if key in lowered), "")


@tracescore.tool
def search_notes(query: str) -> str:
    """Look the question's topic up in the agent's notes."""
    return NOTES.get(_topic(query), "no notes found")


@tracescore.llm(model="demo-llm")
def write_answer(question: str, notes: str) -> str:
    """Stand-in for a chat model: a canned reply per topic."""
    return REPLIES.get(_topic(question), "I don't know.")


@tracescore.agent(name="trivia-agent")
def answer(question: str) -> str:
    """Answer a trivia question: search the notes, then write the answer."""
    notes = search_notes(question)
    return write_answer(question, notes)

