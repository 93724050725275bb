"""Fleet-wide judge limits in Redis: requests/min, tokens/min and dollars over a sliding hour.

Every replica (and every in-process scorer) that points at the same Redis and the same `scope`
(a scorer id or a judge model) shares one set of limits. A call *reserves* before it reaches the
judge (one Lua script, so concurrent replicas cannot both take the last slot) and *settles*
after it with the real usage, so the fleet overshoots by at most what is in flight.

All keys of a scope carry the hash tag `{tracescore:<scope>}`: they live in one Redis Cluster
slot, which a multi-key script needs.

When Redis cannot be reached the limiter does what `on_unreachable` says, counts it and logs it
(at most once every `_LOG_EVERY_S` seconds):

- `"refuse"`: no judge call until Redis answers again (safe for budgets; scores are skipped);
- `"share"`: each replica keeps `1/replicas` of every limit in process (the fleet as a whole
  stays within the limits if `replicas` is the number of replicas);
- `"unlimited"`: judge calls go on unlimited (never loses a score; limits do not hold).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

_log = logging.getLogger(__name__)
_LOG_EVERY_S = 30.0
_MINUTE_S = 60.0
_HOUR_S = 3600.0

Fallback = Literal["refuse", "share", "unlimited"]
FALLBACKS: tuple[str, ...] = ("refuse", "share", "unlimited")

# KEYS: requests zset, tokens zset, dollars zset, amounts hash, totals hash.
# ARGV: id, requests/min (or -1), tokens/min (or -1), usd/hour (or -1), tokens, usd.
# Zset scores are Redis server time (one clock for the whole fleet). Returns 1 or 0.
_RESERVE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local function expire(zkey, field, window)
  local old = redis.call('ZRANGEBYSCORE', zkey, '-inf', now - window)
  for _, id in ipairs(old) do
    if field then
      local amount = tonumber(redis.call('HGET', KEYS[4], id .. ':' .. field) or '0')
      redis.call('HINCRBYFLOAT', KEYS[5], field, -amount)
      redis.call('HDEL', KEYS[4], id .. ':' .. field)
    end
  end
  if #old > 0 then redis.call('ZREMRANGEBYSCORE', zkey, '-inf', now - window) end
end
expire(KEYS[1], nil, 60)
expire(KEYS[2], 'tok', 60)
expire(KEYS[3], 'usd', 3600)
local rpm, tpm, usd = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local tok, cost = tonumber(ARGV[5]), tonumber(ARGV[6])
if rpm >= 0 and redis.call('ZCARD', KEYS[1]) + 1 > rpm then return 0 end
local tok_total = tonumber(redis.call('HGET', KEYS[5], 'tok') or '0')
if tpm >= 0 and tok_total + tok > tpm then return 0 end
local usd_total = tonumber(redis.call('HGET', KEYS[5], 'usd') or '0')
if usd >= 0 and (usd_total + cost > usd or usd == 0) then return 0 end
local id = ARGV[1]
redis.call('ZADD', KEYS[1], now, id)
redis.call('ZADD', KEYS[2], now, id)
redis.call('ZADD', KEYS[3], now, id)
redis.call('HSET', KEYS[4], id .. ':tok', tok, id .. ':usd', cost)
redis.call('HINCRBYFLOAT', KEYS[5], 'tok', tok)
redis.call('HINCRBYFLOAT', KEYS[5], 'usd', cost)
for i = 1, 5 do redis.call('EXPIRE', KEYS[i], 3660) end
return 1
"""

# KEYS as above. ARGV: id, real tokens, real usd, released (1: the call never ran).
_SETTLE = """
local id = ARGV[1]
for i, field in ipairs({'tok', 'usd'}) do
  local old = redis.call('HGET', KEYS[4], id .. ':' .. field)
  if old then
    local new = tonumber(ARGV[i + 1])
    redis.call('HSET', KEYS[4], id .. ':' .. field, new)
    redis.call('HINCRBYFLOAT', KEYS[5], field, new - tonumber(old))
  end
end
if ARGV[4] == '1' then redis.call('ZREM', KEYS[1], id) end
return 1
"""


@dataclass(frozen=True)
class Reservation:
    """One admitted judge call; give it back to `settle` or `release` exactly once."""

    id: str
    tokens: int
    usd: float
    local: bool  # admitted by the in-process fallback (Redis was unreachable)


NO_FLEET = Reservation("", 0, 0.0, local=True)  # the admission of a scorer without fleet limits


class _LocalWindow:
    """The in-process share of the limits (the `share` fallback): the same sliding windows."""

    def __init__(self, rpm: float | None, tpm: float | None, usd: float | None,
                 clock: Callable[[], float]) -> None:
        self._limits = (rpm, tpm, usd)
        self._clock = clock
        self._minute: deque[tuple[float, str, int]] = deque()
        self._hour: deque[tuple[float, str, float]] = deque()
        self._lock = threading.Lock()

    def reserve(self, rid: str, tokens: int, usd: float) -> bool:
        rpm, tpm, budget = self._limits
        with self._lock:
            now = self._clock()
            while self._minute and now - self._minute[0][0] >= _MINUTE_S:
                self._minute.popleft()
            while self._hour and now - self._hour[0][0] >= _HOUR_S:
                self._hour.popleft()
            if rpm is not None and len(self._minute) + 1 > rpm:
                return False
            if tpm is not None and sum(e[2] for e in self._minute) + tokens > tpm:
                return False
            if budget is not None and (budget <= 0 or sum(e[2] for e in self._hour) + usd > budget):
                return False
            self._minute.append((now, rid, tokens))
            self._hour.append((now, rid, usd))
            return True

    def settle(self, rid: str, tokens: int, usd: float, released: bool) -> None:
        with self._lock:
            for window, amount in ((self._minute, tokens), (self._hour, usd)):
                for i, (at, eid, _) in enumerate(window):
                    if eid == rid:
                        if released and window is self._minute:
                            del window[i]
                        else:
                            window[i] = (at, eid, amount)  # type: ignore[assignment]
                        break


class FleetLimiter:
    """Judge limits shared through Redis by every replica pointing at the same `url` and `scope`.

    `reserve(tokens, usd)` (estimates) returns a `Reservation` or None (over a limit, or Redis
    unreachable with `on_unreachable="refuse"`); `settle(reservation, tokens, usd)` records the
    real usage; `release(reservation)` gives back a call that never ran. Never raises on Redis
    errors: they are counted in `unreachable` and handled as `on_unreachable` says.
    """

    def __init__(
        self,
        url: str,
        scope: str,
        *,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        budget_usd_per_hour: float | None = None,
        on_unreachable: Fallback = "refuse",
        replicas: int = 1,
        timeout_s: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
        client: Any = None,
    ) -> None:
        if on_unreachable not in FALLBACKS:
            raise ValueError(f"on_unreachable must be one of {FALLBACKS}, got {on_unreachable!r}")
        if replicas < 1:
            raise ValueError(f"replicas must be >= 1, got {replicas!r}")
        for name, value in (("requests_per_minute", requests_per_minute),
                            ("tokens_per_minute", tokens_per_minute),
                            ("budget_usd_per_hour", budget_usd_per_hour)):
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0, got {value!r}")
        import redis  # the `fleet` extra

        self._errors: tuple[type[BaseException], ...] = (redis.exceptions.RedisError, OSError)
        if client is None:
            client = redis.Redis.from_url(url, socket_timeout=timeout_s,
                                          socket_connect_timeout=timeout_s)
        self._client = client
        self.scope = scope
        self.on_unreachable: Fallback = on_unreachable
        tag = "{tracescore:" + scope + "}"
        self._keys = [f"{tag}:req", f"{tag}:tok", f"{tag}:usd", f"{tag}:amounts", f"{tag}:totals"]
        self._limits = (requests_per_minute, tokens_per_minute, budget_usd_per_hour)
        share = [None if v is None else v / replicas for v in self._limits]
        self._local = _LocalWindow(share[0], share[1], share[2], clock)
        self._reserve = client.register_script(_RESERVE)
        self._settle = client.register_script(_SETTLE)
        self._lock = threading.Lock()
        self._last_log = -_LOG_EVERY_S
        self._clock = clock
        self._avg_usd = 0.0
        self.admitted = 0
        self.refused = 0
        self.unreachable = 0  # Redis errors, each handled by `on_unreachable`

    def reserve(self, tokens: int = 0, usd: float = 0.0) -> Reservation | None:
        """Admit one judge call estimated at `tokens` and `usd`, or None when over a limit."""
        rid = uuid.uuid4().hex
        args = [rid, *(-1 if v is None else v for v in self._limits), int(tokens), float(usd)]
        try:
            ok = bool(self._reserve(keys=self._keys, args=args))
            local = False
        except self._errors as exc:  # Redis unreachable or failing: the documented fallback
            self._unreachable(exc)
            local = True
            if self.on_unreachable == "refuse":
                ok = False
            elif self.on_unreachable == "unlimited":
                ok = True
            else:
                ok = self._local.reserve(rid, int(tokens), float(usd))
        with self._lock:
            if ok:
                self.admitted += 1
            else:
                self.refused += 1
        return Reservation(rid, int(tokens), float(usd), local) if ok else None

    def settle(self, reservation: Reservation, tokens: int | None, usd: float | None) -> None:
        """Record the real usage of an admitted call (None: keep the estimate)."""
        self._finish(reservation, reservation.tokens if tokens is None else int(tokens),
                     reservation.usd if usd is None else float(usd), released=False)

    def release(self, reservation: Reservation) -> None:
        """Give back an admitted call that never reached the judge."""
        self._finish(reservation, 0, 0.0, released=True)

    # --- the scoring core's interface: one run admitted, then settled or released ------------

    def admit_run(self) -> Reservation | None:
        """Admit one scorer run, reserved at the running average of the runs' real cost (one
        Redis round trip: the scoring core calls it in its worker, never in the agent's thread)."""
        return self.reserve(usd=self._avg_usd)

    def settle_run(self, reservation: Reservation, cost_usd: float | None) -> None:
        """The run admitted as `reservation` finished at `cost_usd` (None: unknown, zero)."""
        cost = float(cost_usd) if cost_usd else 0.0
        if cost > 0.0:
            with self._lock:
                self._avg_usd = cost if self._avg_usd == 0.0 else 0.8 * self._avg_usd + 0.2 * cost
        self.settle(reservation, None, cost)

    def _finish(self, reservation: Reservation, tokens: int, usd: float, *, released: bool) -> None:
        if reservation.local:
            self._local.settle(reservation.id, tokens, usd, released)
            return
        try:
            self._settle(keys=self._keys,
                         args=[reservation.id, tokens, usd, "1" if released else "0"])
        except self._errors as exc:  # the reservation stays at its estimate and expires
            self._unreachable(exc)

    def _unreachable(self, exc: BaseException) -> None:
        with self._lock:
            self.unreachable += 1
            now = self._clock()
            if now - self._last_log < _LOG_EVERY_S:
                return
            self._last_log = now
            count = self.unreachable
        _log.warning("tracescore fleet limits: Redis unreachable (%s: %s); %d errors so far; "
                     "on_unreachable=%s", type(exc).__name__, exc, count, self.on_unreachable)


_SETTINGS = ("redis_url", "scope", "requests_per_minute", "tokens_per_minute",
             "budget_usd_per_hour", "on_unreachable", "replicas", "timeout_s")


def fleet_limiter_from(settings: Any, default_scope: str, where: str) -> FleetLimiter:
    """A `FleetLimiter` from a config mapping (the gateway YAML's `fleet:` of a scorer)."""
    from tracescore._exceptions import ConfigurationError

    if not isinstance(settings, dict) or "redis_url" not in settings:
        raise ConfigurationError(f"{where} must be a mapping with redis_url, got {settings!r}")
    unknown = sorted(str(k) for k in settings if k not in _SETTINGS)
    if unknown:
        raise ConfigurationError(f"{where}.{unknown[0]}: unknown key; expected one of "
                                 f"{', '.join(_SETTINGS)}")
    options = {k: v for k, v in settings.items() if k not in ("redis_url", "scope")}
    try:
        return FleetLimiter(str(settings["redis_url"]), str(settings.get("scope") or default_scope),
                            **options)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"{where}: {exc}") from None
