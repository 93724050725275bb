"""Online scoring: sample live agent calls, score them in the background, attach the results.

    provider.add_span_processor(
        ScoringSpanProcessor(BatchSpanProcessor(OTLPSpanExporter()), scorers=[scorer])
    )
"""

from __future__ import annotations

from tracescore.online._events import evaluation_events
from tracescore.online._fleet_limits import FleetLimiter
from tracescore.online._log_processor import ScoringLogRecordProcessor
from tracescore.online._options import OnlineScorer
from tracescore.online._phoenix_sink import PhoenixSink
from tracescore.online._processor import ScoringSpanProcessor
from tracescore.online.intake import (
    AgentMapping,
    RecognisedCall,
    Recogniser,
    TraceLimits,
    build_recognisers,
    recognise,
    recogniser_markers,
)

__all__ = [
    "AgentMapping",
    "FleetLimiter",
    "OnlineScorer",
    "PhoenixSink",
    "RecognisedCall",
    "Recogniser",
    "ScoringLogRecordProcessor",
    "ScoringSpanProcessor",
    "TraceLimits",
    "build_recognisers",
    "evaluation_events",
    "recognise",
    "recogniser_markers",
]
