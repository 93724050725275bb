"""The loadbalancing exporter's routing, computed: which replica the real collector sends a key to."""

from __future__ import annotations

import bisect
import struct
import zlib
from collections import Counter

from tracescore.testing._tools import free_port


class Ring:
    """The loadbalancing exporter's consistent-hash ring (contrib v0.161.0, consistent_hashing.go):
    200 points per endpoint at crc32(endpoint + little-endian i) mod 131071, a taken position moves
    to the next free one; a trace goes to the first point at or after crc32(trace id) mod 131071.
    With three endpoints the arcs are uneven: for random ports one replica owns over 20 % more
    than a third about one time in seven, so the test picks ports whose ring is even."""

    SIZE, POINTS = 131071, 200

    def __init__(self, endpoints: list[str]) -> None:
        candidates = sorted(
            (crc % self.SIZE, crc, endpoint)
            for endpoint in endpoints
            for crc in (zlib.crc32(endpoint.encode() + struct.pack("<I", i)) for i in range(self.POINTS))
        )
        taken: dict[int, str] = {}
        for position, _, endpoint in candidates:
            while position in taken:
                position = (position + 1) % self.SIZE
            taken[position] = endpoint
        self.positions = sorted(taken)
        self.owner = [taken[p] for p in self.positions]

    def endpoint_for(self, trace_id: bytes) -> str:
        index = bisect.bisect_left(self.positions, zlib.crc32(trace_id) % self.SIZE)
        return self.owner[index % len(self.owner)]

    def shares(self) -> dict[str, float]:
        arcs: Counter[str] = Counter()
        previous = self.positions[-1] - self.SIZE
        for position, endpoint in zip(self.positions, self.owner):
            arcs[endpoint] += position - previous
            previous = position
        return {endpoint: arc / self.SIZE for endpoint, arc in arcs.items()}


def even_ring_ports(count: int, tolerance: float = 0.05) -> list[int]:
    """Free ports whose `127.0.0.1:port` endpoints split the ring within `tolerance` of 1/count."""
    for _ in range(500):
        ports = [free_port() for _ in range(count)]
        shares = Ring([f"127.0.0.1:{p}" for p in ports]).shares().values()
        if len(set(ports)) == count and all(abs(s * count - 1) <= tolerance for s in shares):
            return ports
    raise AssertionError("no even ring found")
