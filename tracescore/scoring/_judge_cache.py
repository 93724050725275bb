"""A judge cache shared through Redis (optional, off by default): identical judge requests
within a TTL are answered from Redis instead of the provider.

`cache_judge(scorer, redis_url, ttl_s=...)` wraps a judged scorer's judge in a `CachedJudge`.
A request is identical when everything that decides the reply is: the scorer's id and version
(so a cache is never shared across scorer versions), the judge model and its options (secrets
left out), the step, the system prompt (the rubric), the prompt (the judged text) and the reply
schema. A hit costs nothing and is counted (`hits`, and fleet-wide in Redis, in the hash
`{tracescore:judge-cache:<scorer>@<version>}:stats`); a hit's usage says 0 judge calls.

Redis errors never fail a score: the judge is asked as if there were no cache, the error is
counted (`errors`) and logged at most every 30 s. The cache pickles (the scoring process gets
its own Redis connection).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
from typing import Any

from tracescore._exceptions import ConfigurationError
from tracescore.scoring._base import JudgeUsage
from tracescore.scoring._judge_api import JudgeReply, JudgeRequest

_log = logging.getLogger("tracescore")
_LOG_EVERY_S = 30.0
_SECRET_WORDS = ("key", "secret", "token", "password", "credential")


class CachedJudge:
    """`inner` answered from Redis when an identical request was answered within `ttl_s`."""

    def __init__(self, inner: Any, redis_url: str, *, namespace: str, ttl_s: float = 3600.0,
                 timeout_s: float = 0.25) -> None:
        if isinstance(ttl_s, bool) or not isinstance(ttl_s, (int, float)) or ttl_s < 1:
            raise ConfigurationError(f"judge cache ttl_s must be a number >= 1, got {ttl_s!r}")
        if not isinstance(redis_url, str) or not redis_url:
            raise ConfigurationError(f"judge cache redis_url must be a URL, got {redis_url!r}")
        self.inner = inner
        self.redis_url = redis_url
        self.namespace = namespace
        self.ttl_s = float(ttl_s)
        self.timeout_s = float(timeout_s)
        self._tag = "{tracescore:judge-cache:" + namespace + "}"
        self._options = _options_of(inner)
        self._setup()

    def _setup(self) -> None:
        self._client: Any = None
        self._lock = threading.Lock()
        self._last_log = -_LOG_EVERY_S
        self.hits = 0
        self.misses = 0
        self.errors = 0  # Redis errors (each answered by the judge itself)

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()
                if k not in ("_client", "_lock", "_last_log", "hits", "misses", "errors")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._setup()

    @property
    def model(self) -> str:
        return str(self.inner.model)

    def __getattr__(self, name: str) -> Any:  # check(), preflight(), litellm_kwargs, ...
        if name.startswith("_") or name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"CachedJudge({self.inner!r}, namespace={self.namespace!r})"

    def key(self, request: JudgeRequest) -> str:
        """The Redis key of `request`'s reply."""
        identity = json.dumps([self.model, self._options, request.step, request.system,
                               request.prompt, request.schema_name, request.schema],
                              sort_keys=True, default=repr)
        return f"{self._tag}:{hashlib.sha256(identity.encode()).hexdigest()}"

    async def judge(self, request: JudgeRequest) -> JudgeReply:
        started = time.perf_counter()
        key = self.key(request)
        cached = await asyncio.to_thread(self._get, key)
        if cached is not None:
            try:
                data = request.validate(cached["data"])
                reply = JudgeReply(data=data, raw=str(cached["raw"]), prompt=str(cached["prompt"]),
                                   usage=JudgeUsage(model=self.model, calls=0, input_tokens=0,
                                                    output_tokens=0, cost_usd=0.0,
                                                    latency_ms=(time.perf_counter() - started)
                                                    * 1000.0))
            except Exception:  # noqa: BLE001 - an entry that no longer validates: ask again
                reply = None
            if reply is not None:
                self._count("hits")
                return reply
        self._count("misses")
        reply = await self.inner.judge(request)
        if not reply.notes:  # a reply with notes is about this run (e.g. its ground truth)
            await asyncio.to_thread(self._put, key, reply)
        return reply

    # --- Redis (on a worker thread: never the event loop's) ----------------------------------
    def _redis(self) -> Any:
        with self._lock:
            if self._client is None:
                import redis  # the `fleet` extra

                self._client = redis.Redis.from_url(self.redis_url,
                                                    socket_timeout=self.timeout_s,
                                                    socket_connect_timeout=self.timeout_s)
            return self._client

    def _get(self, key: str) -> dict[str, Any] | None:
        """The entry of `key` (None: none, or Redis failing), counted in the fleet's stats."""
        try:
            client = self._redis()
            value = client.get(key)
            client.hincrby(f"{self._tag}:stats", "misses" if value is None else "hits", 1)
        except Exception as exc:  # noqa: BLE001 - Redis down or failing: no cache
            self._failed(exc)
            return None
        if value is None:
            return None
        try:
            entry = json.loads(value)
        except ValueError:
            return None
        return entry if isinstance(entry, dict) and "data" in entry else None

    def _put(self, key: str, reply: JudgeReply) -> None:
        entry = json.dumps({"data": reply.data, "raw": reply.raw, "prompt": reply.prompt},
                           default=repr)
        try:
            self._redis().set(key, entry, ex=int(self.ttl_s))
        except Exception as exc:  # noqa: BLE001 - Redis down or failing: counted, logged each minute
            self._failed(exc)

    def _count(self, field: str) -> None:
        with self._lock:
            setattr(self, field, getattr(self, field) + 1)

    def _failed(self, exc: BaseException) -> None:
        with self._lock:
            self.errors += 1
            now = time.monotonic()
            if now - self._last_log < _LOG_EVERY_S:
                return
            self._last_log = now
        _log.warning("tracescore judge cache: Redis unreachable (%s: %s); judging without the "
                     "cache", type(exc).__name__, exc)


def _options_of(judge: Any) -> list[Any]:
    """The judge's options that shape a reply (secrets left out), in a stable order."""
    options = dict(getattr(judge, "litellm_kwargs", {}) or {})
    options["json_mode"] = getattr(judge, "json_mode", None)
    return sorted((k, repr(v)) for k, v in options.items()
                  if not any(word in k.lower() for word in _SECRET_WORDS))


def cache_judge(scorer: Any, redis_url: str, *, ttl_s: float = 3600.0) -> Any:
    """Give a judged `scorer` a judge cache in Redis (its judge wrapped in a `CachedJudge`,
    namespaced by the scorer's id and version); returns `scorer`."""
    from tracescore.scoring._provenance import scorer_version

    judge = getattr(scorer, "judge", None)
    if judge is None or not callable(getattr(judge, "judge", None)):
        raise ConfigurationError(f"a judge cache needs a judged scorer, got {scorer!r}")
    if isinstance(judge, CachedJudge):
        return scorer
    namespace = f"{getattr(scorer, 'id', 'scorer')}@{scorer_version(scorer)}"
    scorer.judge = CachedJudge(judge, redis_url, namespace=namespace, ttl_s=ttl_s)
    return scorer
