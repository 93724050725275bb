"""The quiet-period table the run and conversation scopes share: a group leaves once, after
nothing arrived for it for the quiet period, or earlier when a bound says so (counted)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from tracescore._exceptions import ConfigurationError
from tracescore.online._quiet import AGE, OVERFLOW, QUIET, Group, QuietTable


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _table(clock: _Clock, **bounds: object) -> tuple[QuietTable[str], list[tuple[object, list[str], str]]]:
    out: list[tuple[object, list[str], str]] = []

    def deliver(group: Group[str], reason: str) -> None:
        out.append((group.key, list(group.items), reason))

    return QuietTable(quiet_s=5.0, deliver=deliver, clock=clock, **bounds), out  # type: ignore[arg-type]


def test_each_arrival_starts_the_quiet_period_again_and_the_group_leaves_once() -> None:
    clock = _Clock()
    table, out = _table(clock)
    table.arrive("run-1", "root", size=10, ready=True)
    for _ in range(3):  # a span every 4 s: never quiet for 5 s
        clock.now += 4
        assert table.touch("run-1")
        table.expire()
        assert out == []
    clock.now += 4.9
    table.expire()
    assert out == []
    clock.now += 0.2
    table.expire()
    table.expire()
    assert out == [("run-1", ["root"], QUIET)]
    assert len(table) == 0 and table.bytes == 0 and table.counts == {QUIET: 1}
    assert not table.touch("run-1")  # a late arrival finds nothing to keep open


def test_a_group_not_ready_waits_past_its_quiet_period_until_its_age_bound() -> None:
    clock = _Clock()
    table, out = _table(clock, max_age_s=60.0)
    table.arrive("run-1", "child")  # the root has not arrived
    clock.now += 30
    table.expire()
    assert out == []
    table.arrive("run-2", "root", ready=True)
    clock.now += 30
    table.expire()
    assert out == [("run-1", ["child"], AGE), ("run-2", ["root"], QUIET)]
    assert table.counts == {AGE: 1, QUIET: 1}


def test_groups_and_bytes_are_bounded_the_oldest_going_first_counted() -> None:
    clock = _Clock()
    table, out = _table(clock, max_groups=2, max_bytes=100)
    table.arrive("a", "a1", size=40, ready=True)
    table.arrive("b", "b1", size=40, ready=True)
    table.arrive("c", "c1", size=10)  # a third group: the oldest leaves
    assert out == [("a", ["a1"], OVERFLOW)]
    table.arrive("c", "c2", size=80)  # past the bytes: b leaves, c keeps its items
    assert out[-1] == ("b", ["b1"], OVERFLOW)
    assert len(table) == 1 and table.bytes == 90
    assert table.counts == {OVERFLOW: 2}


def test_take_and_release_all_deliver_with_the_owners_reason() -> None:
    clock = _Clock()
    table, out = _table(clock)
    table.arrive("a", "a1", ready=True)
    table.arrive("b", "b1")
    assert table.take("a", "turn_limit")
    assert not table.take("a", "turn_limit")
    table.release_all("shutdown")
    assert out == [("a", ["a1"], "turn_limit"), ("b", ["b1"], "shutdown")]
    assert table.counts == {"turn_limit": 1, "shutdown": 1}


def test_a_failing_delivery_does_not_keep_the_other_groups() -> None:
    clock = _Clock()
    seen: list[object] = []

    def deliver(group: Group[str], reason: str) -> None:
        seen.append(group.key)
        if group.key == "a":
            raise RuntimeError("sink down")

    table: QuietTable[str] = QuietTable(quiet_s=1.0, deliver=deliver, clock=clock)
    table.arrive("a", ready=True)
    table.arrive("b", ready=True)
    clock.now += 2
    table.expire()
    assert seen == ["a", "b"] and len(table) == 0


def test_concurrent_arrivals_deliver_each_group_exactly_once() -> None:
    clock = _Clock()
    table, out = _table(clock, max_groups=50)

    def feed(worker: int) -> None:
        for n in range(500):
            table.arrive(n % 80, f"{worker}-{n}", size=1, ready=True)
            if n % 50 == 0:
                table.expire()

    threads = [threading.Thread(target=feed, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    table.release_all("shutdown")
    delivered = sum(len(items) for _, items, _ in out)
    assert delivered == 4 * 500 and table.bytes == 0


@pytest.mark.parametrize("bad", [{"quiet_s": -1}, {"max_groups": 0}, {"max_bytes": 1.5},
                                 {"max_age_s": "x"}])
def test_bounds_are_checked(bad: dict[str, object]) -> None:
    options: dict[str, object] = {"quiet_s": 1.0, **bad}
    with pytest.raises(ConfigurationError):
        QuietTable(deliver=lambda g, r: None, **options)  # type: ignore[arg-type]


def test_the_core_timer_lets_quiet_groups_go_without_a_thread_of_their_own() -> None:
    from tracescore.online._core import ScoringCore
    from tracescore.online._options import OnlineScorer, ProcessorOptions
    from tracescore.online.intake._trace_input import TraceLimits
    from tracescore.scoring.keywords import create_keyword_coverage_scorer

    core = ScoringCore((OnlineScorer(create_keyword_coverage_scorer()),),
                       ProcessorOptions(max_wait_s=0.2), export=lambda item, events: None,
                       carrier=lambda run, end: None, trace_limits=TraceLimits())
    left: list[object] = []
    table: QuietTable[str] = QuietTable(quiet_s=0.1, deliver=lambda g, r: left.append(g.key))
    core.add_timer(table.expire)
    table.arrive("run-0", "root", ready=True)
    try:
        _wait_for(lambda: left == ["run-0"])
        threads = threading.active_count()
        for n in range(1, 21):
            table.arrive(f"run-{n}", "root", ready=True)
        assert threading.active_count() == threads  # no thread per group
        _wait_for(lambda: len(left) == 21)
    finally:
        core.close(1)


def _wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the quiet groups never left"
        time.sleep(0.02)
