"""Online scoring: sample live agent calls, score them in the background, attach the results.

    provider.add_span_processor(
        ScoringSpanProcessor(BatchSpanProcessor(OTLPSpanExporter()), scorers=[scorer])
    )
"""

from __future__ import annotations

from tracescore.online._events import evaluation_events
from tracescore.online._options import OnlineScorer
from tracescore.online._processor import ScoringSpanProcessor

__all__ = ["OnlineScorer", "ScoringSpanProcessor", "evaluation_events"]
