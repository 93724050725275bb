"""The gateway's raw-byte gate: a request passes through unread only when it holds none of the
reader's marker texts. Searching fewer texts must find exactly the same requests."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

import tracescore
from tracescore.online.intake import ITEM_MARKERS, AgentReader
from tracescore.online.intake._agents import shortest

_ALPHABET = "ab._k"
_MARKERS = AgentReader(tuple(tracescore.build_recognisers([]))).request_markers(ITEM_MARKERS)


@given(st.frozensets(st.text(_ALPHABET, min_size=1, max_size=4), min_size=1, max_size=8),
       st.text(_ALPHABET, max_size=30))
def test_the_shortest_texts_find_the_requests_all_texts_find(texts: frozenset[str],
                                                              raw: str) -> None:
    kept = shortest(texts)
    assert kept <= texts
    assert any(t in raw for t in kept) == any(t in raw for t in texts)


@given(st.sampled_from(sorted(ITEM_MARKERS | {"openinference.span.kind", "traceloop.span.kind",
                                              "langfuse.observation.type"})),
       st.text(max_size=20), st.text(max_size=20))
def test_a_request_with_any_known_marker_key_is_read(key: str, before: str, after: str) -> None:
    raw = f"{before}{key}{after}"
    assert any(m in raw for m in _MARKERS)


@given(st.sampled_from(["span.kind", "span_kind", "observation.type", "entity.kind"]),
       st.text("abcxyz_", min_size=1, max_size=8), st.sampled_from([".", "_", ""]))
def test_a_request_with_a_tool_kind_key_of_any_namespace_is_read(suffix: str, namespace: str,
                                                                 joint: str) -> None:
    raw = f"\x12\x0a{namespace}{joint}{suffix}\x12\x04tool"
    assert any(m in raw for m in _MARKERS)
