"""What a judge is sent: the judged texts redacted (secrets, personal data) and capped in size.

The same redaction rules as exported content (the built-in rules plus the redaction hook, if
one is configured in this process) run on the question and the answer before any prompt is
built, so every prompt, and every step prompt exported on the span, is exactly what the judge
received. The cap keeps one score's judge input bounded whatever the agent produced.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from tracescore._exceptions import ConfigurationError

# Characters of each judged text (question, answer) a judge is sent by default: about 5,000
# tokens each, so the largest prompt of a run (question + answer + statements) stays near 16k
# tokens, inside the 32k-128k token windows of common judge models.
DEFAULT_MAX_JUDGE_INPUT_CHARS = 20_000
MIN_JUDGE_INPUT_CHARS = 100  # the smallest cap (and the least worth sending)
_REDACTION_MARGIN = 512  # characters past the cut that are redacted with the kept text


@dataclass(frozen=True)
class JudgeInput:
    """A text prepared for the judge: the text sent, its length before, whether it was cut."""

    text: str
    original_chars: int
    cut: bool


def check_max_chars(value: object) -> int:
    """Validate `max_judge_input_chars` (an int >= 100)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_JUDGE_INPUT_CHARS:
        raise ConfigurationError(
            f"max_judge_input_chars must be an integer >= {MIN_JUDGE_INPUT_CHARS}, got {value!r}")
    return value


def prepare(text: str, *, redact: bool, max_chars: int) -> JudgeInput:
    """`text` as the judge gets it: redacted, then cut to `max_chars` (with a marker).

    Only the first `max_chars` plus a margin are redacted (a secret straddling the first cut
    is inside the margin, which the final cut drops), so a huge output costs no more than
    a capped one.
    """
    from tracescore._config import content_settings
    from tracescore._content import redact as redact_text
    from tracescore._content import truncate

    original = len(text)
    cut = original > max_chars
    if cut:
        text = text[:max_chars + _REDACTION_MARGIN]
    if redact:  # whatever the content-capture settings say
        text = redact_text(text, dataclasses.replace(content_settings(), redact=True))
    if cut:
        text = truncate(text[:max_chars], max_chars, original - max_chars)
    return JudgeInput(text=text, original_chars=original, cut=cut)
