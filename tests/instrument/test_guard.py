"""The one guard for telemetry code (`tracescore._guard`): whatever fails inside a site is
counted by site, logged once per site, and never reaches the caller."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracescore._guard import Guard

_ERRORS = st.sampled_from([ValueError, KeyError, TypeError, RuntimeError, ZeroDivisionError,
                           AttributeError, OSError])


class _Recorder(logging.Handler):
    def __init__(self, records: list[logging.LogRecord]) -> None:
        super().__init__()
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@settings(max_examples=50, deadline=None)
@given(failures=st.lists(st.tuples(st.sampled_from(["read", "export", "offer"]), _ERRORS),
                         max_size=30))
def test_failures_are_counted_by_site_and_each_site_is_logged_once(
        failures: list[tuple[str, type[Exception]]]) -> None:
    records: list[logging.LogRecord] = []
    logger = logging.getLogger("tracescore.test_guard")
    handler = _Recorder(records)
    logger.addHandler(handler)
    try:
        guard = Guard(logger)
        sites = {name: guard.site(name, "could not %s", name) for name in ("read", "export",
                                                                           "offer")}
        for name, error in failures:
            with sites[name]:
                raise error("broken")
            # reached: the failure never leaves the site
        expected = {name: sum(1 for n, _ in failures if n == name) for name, _ in failures}
        assert dict(guard.counts) == expected
        assert sorted(r.getMessage() for r in records) == sorted(f"could not {n}"
                                                                 for n in expected)
        assert all(r.exc_info is not None for r in records)  # with the traceback
    finally:
        logger.removeHandler(handler)


def test_a_site_lets_a_clean_block_and_non_exceptions_through() -> None:
    guard = Guard("tracescore.test_guard")
    site = guard.site("s", "failed")
    with site:
        value = 1
    assert value == 1 and not guard.counts
    with pytest.raises(KeyboardInterrupt), site:
        raise KeyboardInterrupt
    assert not guard.counts


def test_wrap_returns_the_default_and_once_logs_without_an_exception(
        caplog: pytest.LogCaptureFixture) -> None:
    guard = Guard("tracescore.test_guard")

    @guard.wrap("parse", "tracescore: could not parse", default=-1)
    def parse(text: str) -> int:
        return int(text)

    with caplog.at_level(logging.WARNING, "tracescore.test_guard"):
        assert parse("7") == 7
        assert parse("x") == -1 and parse("y") == -1
        guard.once("down", "tracescore: the next hop is failing (%s)", "503")
        guard.once("down", "tracescore: the next hop is failing (%s)", "503")
    assert guard.counts == {"parse": 2, "down": 2}
    assert [r.getMessage() for r in caplog.records] == [
        "tracescore: could not parse", "tracescore: the next hop is failing (503)"]
