"""The intake: everything between "a span ended" and "here is something to score", read the same
way for both front doors. Its internal API is what this module exports; the doors hand it views
(`SdkSpanView` over SDK spans, `OtlpSpanView` over OTLP protobuf spans)."""

from tracescore.online.intake._view import (
    OtlpSpanView,
    SdkSpanView,
    SpanEvent,
    SpanView,
    attributes_of,
    value_of,
)

__all__ = ["OtlpSpanView", "SdkSpanView", "SpanEvent", "SpanView", "attributes_of", "value_of"]
