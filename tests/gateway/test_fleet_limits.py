"""Fleet limits shared through a real redis-server (Debian's, `make redis`) on a free loopback port."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _redis import RedisServer, redis
from hypothesis import given, settings
from hypothesis import strategies as st

from tracescore.online._fleet_limits import FleetLimiter


@pytest.fixture
def server() -> Iterator[RedisServer]:
    srv = RedisServer()
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def test_replicas_reserving_at_once_share_one_request_limit(server: RedisServer) -> None:
    limit = 25
    replicas = [FleetLimiter(server.url, "judge-a", requests_per_minute=limit) for _ in range(3)]
    admitted: list[int] = []
    lock = threading.Lock()

    def hammer(limiter: FleetLimiter) -> None:
        for _ in range(40):
            if limiter.reserve() is not None:
                with lock:
                    admitted.append(1)

    threads = [threading.Thread(target=hammer, args=(r,)) for r in replicas for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(admitted) == limit  # 240 attempts, exactly the fleet's limit admitted
    assert sum(r.refused for r in replicas) == 240 - limit
    # another scope has its own limits
    assert FleetLimiter(server.url, "judge-b", requests_per_minute=1).reserve() is not None


@settings(max_examples=15, deadline=None)
@given(costs=st.lists(st.tuples(st.floats(0.0, 0.02), st.floats(0.0, 0.05)), min_size=1,
                      max_size=40),
       budget=st.floats(0.01, 0.2))
def test_spend_settled_with_real_usage_stays_within_the_budget(
    shared_server: RedisServer, costs: list[tuple[float, float]], budget: float
) -> None:
    """Reserve at an estimate, settle at the real cost: what is admitted never passes the budget
    as long as the real cost is at most the estimate (otherwise by at most one call's excess)."""
    scope = f"budget-{time.monotonic_ns()}"
    limiter = FleetLimiter(shared_server.url, scope, budget_usd_per_hour=budget)
    spent = 0.0
    for real, estimate in costs:
        reservation = limiter.reserve(usd=max(real, estimate))
        if reservation is not None:
            limiter.settle(reservation, None, real)
            spent += real
    assert spent <= budget + 1e-9
    totals = redis.Redis.from_url(shared_server.url).hget("{tracescore:" + scope + "}:totals", "usd")
    assert float(totals or 0) == pytest.approx(spent, abs=1e-9)


@pytest.fixture(scope="module")
def shared_server() -> Iterator[RedisServer]:
    srv = RedisServer()
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def test_tokens_per_minute_and_release(server: RedisServer) -> None:
    limiter = FleetLimiter(server.url, "model-x", tokens_per_minute=1000, requests_per_minute=2)
    first = limiter.reserve(tokens=600)
    assert first is not None
    assert limiter.reserve(tokens=600) is None  # 1200 > 1000 tokens
    limiter.settle(first, 300, None)  # the real usage was smaller: room again
    second = limiter.reserve(tokens=600)
    assert second is not None
    assert limiter.reserve() is None  # 2 requests a minute
    limiter.release(second)  # never ran: its request and tokens are given back
    assert limiter.reserve(tokens=700) is not None


def test_keys_of_a_scope_live_in_one_cluster_slot(server: RedisServer) -> None:
    from redis.crc import key_slot

    limiter = FleetLimiter(server.url, "gpt-4o-mini", requests_per_minute=5, budget_usd_per_hour=1)
    reservation = limiter.reserve(tokens=10, usd=0.01)
    assert reservation is not None
    keys = redis.Redis.from_url(server.url, decode_responses=True).keys("*")
    assert len(keys) == 5
    assert len({key_slot(str(k).encode()) for k in keys}) == 1


@pytest.mark.parametrize(("mode", "admitted"), [("refuse", 0), ("share", 4), ("unlimited", 30)])
def test_redis_stopped_midway_falls_back_as_configured_and_counts_it(
    server: RedisServer, mode: str, admitted: int, caplog: pytest.LogCaptureFixture
) -> None:
    limiter = FleetLimiter(server.url, f"fallback-{mode}", requests_per_minute=12,
                           on_unreachable=mode, replicas=3)  # type: ignore[arg-type]
    assert all(limiter.reserve() is not None for _ in range(6))  # through Redis
    server.stop()
    got = [limiter.reserve() for _ in range(30)]
    assert sum(r is not None for r in got) == admitted  # share: 12 / 3 replicas = 4
    assert limiter.unreachable == 30
    assert all(r.local for r in got if r is not None)
    for reservation in got:
        if reservation is not None:
            limiter.settle(reservation, 10, 0.001)  # settled in process, no error
    assert limiter.unreachable == 30
    assert [r.message for r in caplog.records].count(
        next(r.message for r in caplog.records if "Redis unreachable" in r.message)) == 1


def test_the_gateway_yaml_gives_a_scorer_fleet_limits(server: RedisServer, tmp_path: Path) -> None:
    from tracescore.gateway import load_gateway_config

    path = tmp_path / "gateway.yaml"
    path.write_text(
        "scoring:\n  scorers:\n    - scorer: similarity\n      fleet: {redis_url: '" + server.url
        + "', requests_per_minute: 2, budget_usd_per_hour: 1.5, on_unreachable: share,"
        " replicas: 3}\n")
    (online,) = load_gateway_config(path, environ={}).scorers or ()
    limiter = online.fleet_limits
    assert limiter is not None and limiter.on_unreachable == "share"
    assert limiter.scope == online.scorer_id
    assert [limiter.admit_run() is not None for _ in range(3)] == [True, True, False]


@pytest.mark.parametrize(("fleet", "key"), [
    ("{requests_per_minute: 2}", "scoring.scorers[0].fleet"),
    ("{redis_url: 'redis://127.0.0.1:1', colour: red}", "scoring.scorers[0].fleet.colour"),
    ("{redis_url: 'redis://127.0.0.1:1', on_unreachable: maybe}", "on_unreachable"),
    ("{redis_url: 'redis://127.0.0.1:1', replicas: 0}", "replicas"),
])
def test_bad_fleet_settings_name_the_key(fleet: str, key: str, tmp_path: Path) -> None:
    from tracescore._exceptions import ConfigurationError
    from tracescore.gateway import load_gateway_config

    path = tmp_path / "gateway.yaml"
    path.write_text("scoring: {scorers: [{scorer: similarity, fleet: " + fleet + "}]}\n")
    with pytest.raises(ConfigurationError, match=key.replace("[", r"\[").replace("]", r"\]")):
        load_gateway_config(path, environ={})
