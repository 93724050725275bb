"""Backlog gauges per replica, the signal to scale on: judge jobs queued, judge runs in flight,
and how long the oldest held agent span has waited (`held_now` counts the held spans); with
fleet limits, the Redis errors they met."""

from __future__ import annotations

from typing import Any


def register_backlog(metrics: Any, engine: Any) -> None:
    """`scoring_queued`, `scoring_in_flight` and `oldest_held_age_seconds` gauges of `engine`."""
    core = engine.core
    metrics.gauge("scoring_queued", lambda: core.worker.pending + core.fast.pending)
    metrics.gauge("scoring_in_flight", lambda: core.worker.running + core.fast.running)
    metrics.gauge("oldest_held_age_seconds", core.held.oldest_age_s)
    limiters = [o.fleet_limits for o in core.scorers if o.fleet_limits is not None]
    if limiters:  # the fleet limits' Redis errors (each handled by `on_unreachable`)
        metrics.gauge("fleet_redis_unreachable", lambda: sum(x.unreachable for x in limiters))
