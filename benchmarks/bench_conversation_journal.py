"""The gateway's conversation journal at its bound, `tracescore serve` side by side in one run:

  * taken: turns/s the gateway's conversation tracker takes over its journal (what its timer
    does with each acknowledged turn), in process, while the conversations held are under
    `max_conversations`, then once every new conversation makes the oldest one go (each
    let-go touches the journal's `turns` table under the lock the receivers need);
  * intake: turns/s `tracescore serve` acknowledges in the same two phases; 4 gRPC senders,
    10 turns (each its own trace) a request;
  * restart: seconds from start to ready (answering) on a journal holding more conversations
    than `max_conversations` (the 5h case of issue 38: 19,245 conversations over 10,000), next
    to a start on an empty journal;
  * the journal file's size once the gateway let most of its conversations go.

For this checkout and, with `--baseline DIR` (another checkout, e.g. `git archive main | tar -x
-C /tmp/base`), that one's gateway on the same machine, alternating.

    python benchmarks/bench_conversation_journal.py [--quick] [--baseline DIR] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment, print_table, write_json

_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
SCORER = "_bench_turns:TurnCounter"


def _scorer_module(folder: Path) -> None:
    (folder / "_bench_turns.py").write_text(
        "from tracescore.scoring._base import Scorer, ScoreResult\n"
        "class TurnCounter(Scorer):\n"
        "    id = 'turn-counter'\n    name = 'Turn counter'\n"
        "    uses_judge = False\n    scope = 'conversation'\n"
        "    async def evaluate(self, call):\n"
        "        return ScoreResult(run_id=call.run_id or '', scorer_id=self.id,\n"
        "                           scorer_name=self.name, score=float(len(call.turns)))\n")


def _gateway(source: Path | None, folder: Path, endpoint: str, max_conversations: int,
             sync: str) -> Any:
    from tracescore.testing import GatewayProcess

    config = folder / "gateway.yaml"
    config.write_text(f"scoring:\n  isolation: thread\n  scorers:\n    - {{scorer: '{SCORER}'}}\n"
                      f"conversations: {{quiet_s: 600, max_conversations: {max_conversations}}}\n"
                      f"journal: {{sync: {sync}}}\n", encoding="utf-8")
    paths = [str(source)] if source is not None else []
    env = {"PYTHONPATH": os.pathsep.join([*paths, str(folder)])}
    return GatewayProcess(["--config", str(config), "--endpoint", endpoint,
                           "--journal", str(folder / "journal.db")], env=env,
                          cwd=folder, ready_timeout_s=600)  # (not this checkout's root)


def _requests(conversations: range, turns_each: int, rng: random.Random) -> list[bytes]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    turns = [f"chat-{c}" for c in conversations for _ in range(turns_each)]
    bodies = []
    for start in range(0, len(turns), 10):
        request = ExportTraceServiceRequest()
        spans = request.resource_spans.add().scope_spans.add().spans
        for index, conversation in enumerate(turns[start:start + 10], start):
            span = spans.add(name="invoke_agent geo", start_time_unix_nano=index + 1,
                             end_time_unix_nano=index + 2)
            span.trace_id, span.span_id = rng.randbytes(16), rng.randbytes(8)
            for key, value in (("gen_ai.operation.name", "invoke_agent"),
                               ("gen_ai.agent.name", "geo"), ("session.id", conversation),
                               ("gen_ai.input.messages", json.dumps([{"role": "user", "parts": [
                                   {"type": "text", "content": f"question {index}?"}]}])),
                               ("gen_ai.output.messages", json.dumps([{
                                   "role": "assistant", "parts": [
                                       {"type": "text", "content": "An answer."}]}]))):
                span.attributes.add(key=key).value.string_value = value
        bodies.append(request.SerializeToString())
    return bodies


def _send(port: int, bodies: list[bytes], senders: int = 4) -> float:
    """Turns/s acknowledged for `bodies` (10 turns each) from `senders` threads."""
    import grpc

    chunks = [bodies[i::senders] for i in range(senders)]

    def run(chunk: list[bytes]) -> None:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            export = channel.unary_unary(_EXPORT)
            for body in chunk:
                export(body, timeout=120)

    threads = [threading.Thread(target=run, args=(c,)) for c in chunks]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return 10 * len(bodies) / (time.perf_counter() - start)


def taken(source: Path | None, bound: int, at_bound: int, sync: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(source) if source is not None else ""}
    done = subprocess.run([sys.executable, str(Path(__file__).with_name("_journal_tracker.py")),
                           str(bound), str(at_bound), sync], env=env, capture_output=True, text=True, check=True,
                          timeout=1800)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {"taken_under": result["under"], "taken_at": result["at"]}


def intake(source: Path | None, endpoint: str, bound: int, at_bound: int, sync: str,
           rng: random.Random) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="tsj-bench-") as tmp:
        folder = Path(tmp)
        _scorer_module(folder)
        gateway = _gateway(source, folder, endpoint, bound, sync).start()
        try:
            under = _send(gateway.grpc_port, _requests(range(bound), 3, rng))  # fills it
            at = _send(gateway.grpc_port, _requests(range(bound, bound + at_bound), 3, rng))
        finally:
            gateway.kill()
        size = (folder / "journal.db").stat().st_size
        return {"under": under, "at": at, "file_mb": size / 1e6}


def _journal(path: Path, conversations: int, rng: random.Random) -> None:
    """A journal as the version before this one left it: `conversations` of 1-2 turns."""
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE spans (id INTEGER PRIMARY KEY, kind INTEGER NOT NULL, "
               "count INTEGER NOT NULL, body BLOB NOT NULL)")
    db.execute("CREATE TABLE turns (id INTEGER PRIMARY KEY, conversation TEXT NOT NULL, "
               "body TEXT NOT NULL)")
    db.execute("CREATE TABLE conversations (conversation TEXT PRIMARY KEY, "
               "scored INTEGER NOT NULL)")
    rows = []
    for c in range(conversations):
        for n in range(1 + c % 2):
            rows.append((f"chat-{c}", json.dumps({
                "input": f"question {n} of chat {c}? " * 8, "output": "An answer. " * 10,
                "agent": "geo", "trace_id": rng.getrandbits(128), "span_id": rng.getrandbits(64),
                "end_ns": 1_700_000_000_000_000_000 + c * 10 + n, "scorers": ["turn-counter"]})))
    db.executemany("INSERT INTO turns (conversation, body) VALUES (?, ?)", rows)
    db.commit()
    db.close()


def restart(source: Path | None, endpoint: str, journal: Path, bound: int, sync: str
            ) -> float:
    with tempfile.TemporaryDirectory(prefix="tsj-bench-") as tmp:
        folder = Path(tmp)
        _scorer_module(folder)
        shutil.copy(journal, folder / "journal.db")
        gateway = _gateway(source, folder, endpoint, bound, sync)
        start = time.perf_counter()
        gateway.start()
        took = time.perf_counter() - start
        gateway.kill()
        return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--baseline", type=Path, help="another checkout's root, side by side")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--sync", default="full", choices=["full", "normal"],
                        help="journal.sync (default: the gateway's, full)")
    args = parser.parse_args()
    from tracescore.testing import OTLPReceiver

    bound = 1_000 if args.quick else 10_000
    over = 2 * bound if args.quick else 19_245
    at_bound = min(bound, 3_000)  # new conversations sent at the bound (the baseline is slow)
    sources: dict[str, Path | None] = {"this checkout": None}
    if args.baseline is not None:
        sources = {"baseline": args.baseline.resolve(), **sources}
    results: dict[str, dict[str, float]] = {name: {} for name in sources}
    with OTLPReceiver() as receiver, tempfile.TemporaryDirectory() as tmp:
        journal, empty = Path(tmp) / "journal.db", Path(tmp) / "empty.db"
        _journal(journal, over, random.Random(1))
        _journal(empty, 0, random.Random(1))
        for name, source in sources.items():
            results[name].update(taken(source, bound, at_bound, args.sync))
            results[name].update(intake(source, receiver.grpc_endpoint, bound, at_bound,
                                        args.sync, random.Random(2)))
            for key, path in (("start_s", empty), ("restart_s", journal)):
                results[name][key] = restart(source, receiver.grpc_endpoint, path, bound,
                                             args.sync)
    print_table([[name, r["taken_under"], r["taken_at"], r["taken_at"] / r["taken_under"],
                  r["under"], r["at"], r["at"] / r["under"]] for name, r in results.items()],
                ["gateway", "taken/s under", "taken/s at the bound", "at / under",
                 "acked/s under", "acked/s at the bound", "at / under"],
                title=f"turns/s, max_conversations {bound}, 3 turns a conversation, "
                      f"journal.sync {args.sync}")
    print_table([[name, r["file_mb"], r["start_s"], r["restart_s"]]
                 for name, r in results.items()],
                ["gateway", "journal MB", "start s (empty)",
                 f"restart s ({over} conversations)"], title="journal and restart")
    write_json(args.json, {"environment": environment(), "bound": bound, "sync": args.sync,
                           "conversations_at_restart": over, "results": results})


if __name__ == "__main__":
    main()
