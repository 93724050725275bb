"""The receivers' connection limits against the process's open files limit.

Every connection is a file descriptor. When `max_connections` of all receivers together exceed
what the process may open, the accept loop meets EMFILE under load: a valid sender times out and
retries (duplicating spans it already delivered) while asyncio retries accept() in a tight loop.
So the limits must fit: the soft limit is raised to the hard one (as the Collector does), a
default limit is lowered to fit what is left, and a limit the user set that cannot fit refuses
to start with the numbers to change.
"""

from __future__ import annotations

import logging

from tracescore._exceptions import ConfigurationError

DEFAULT_MAX_CONNECTIONS = 1000
# descriptors kept for all but the receivers' connections: listening sockets, the journal, the
# forwarder's and the judge's connections, event loops, log files, the health endpoint's peers
RESERVED = 128
_MIN_CONNECTIONS = 16
_log = logging.getLogger("tracescore.gateway")


def open_files_limit() -> int | None:
    """The soft open files limit after raising it to the hard one; None where unknown."""
    try:
        import resource
    except ImportError:  # not on Windows
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            _log.debug("tracescore: could not raise the open files limit", exc_info=True)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def fit_connections(configured: int | None, receivers: int, limit: int | None) -> int:
    """`max_connections` per receiver for `receivers` receivers within `limit` open files.

    `configured` None (the default) gives 1000, lowered to fit with a warning; a configured value
    that does not fit raises ConfigurationError (start-up exit 2)."""
    wanted = DEFAULT_MAX_CONNECTIONS if configured is None else configured
    if limit is None or receivers == 0 or wanted * receivers + RESERVED <= limit:
        return wanted
    fits = (limit - RESERVED) // receivers
    if configured is not None or fits < _MIN_CONNECTIONS:
        raise ConfigurationError(
            f"receivers.max_connections: {wanted} connections on each of {receivers} "
            f"receiver(s), plus {RESERVED} files the gateway keeps for itself, need "
            f"{wanted * receivers + RESERVED} open files; the open files limit is {limit} "
            f"(ulimit -n): raise it, or set receivers.max_connections to at most "
            f"{max(fits, 0)}")
    _log.warning("tracescore: receivers.max_connections lowered from %d to %d per receiver to "
                 "fit the open files limit %d (ulimit -n; %d receivers, %d files kept for the "
                 "gateway itself); raise the limit to accept more", wanted, fits, limit,
                 receivers, RESERVED)
    return fits
