"""Stands in for a third-party agent library you cannot edit (used by instrument_existing_agent.py).

Nothing here imports tracescore.
"""

from __future__ import annotations

FAQ = {
    "refund": "Refunds are issued within 5 business days to the original payment method.",
    "shipping": "Standard shipping takes 3 to 5 business days; express takes 1 to 2.",
    "password": "Use the 'Forgot password' link on the sign-in page to reset your password.",
}


class SupportBot:
    """A small rule-based support agent with a `run(question)` method."""

    def __init__(self, tone: str = "friendly") -> None:
        self.tone = tone

    def run(self, question: str) -> str:
        topic = next((key for key in FAQ if key in question.lower()), None)
        if topic is None:
            return "Sorry, I can only help with refunds, shipping and passwords."
        prefix = "Happy to help! " if self.tone == "friendly" else ""
        return prefix + FAQ[topic]

    async def arun(self, question: str) -> str:
        return self.run(question)
