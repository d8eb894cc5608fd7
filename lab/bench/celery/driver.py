"""The Celery client of `tidepool-bench celery`: submit N requests of one
task as fast as `apply_async` allows (or at --rate per second), collect each result as it is stored,
and write `rid submitted_ns received_ns status` per request to --out.

Results are seen through the Redis result backend's own notification (it
publishes every stored result on the channel `celery-task-meta-<task id>`),
read by one pattern subscription on a thread of its own, so a result is
timestamped when it arrives, not when a loop over `AsyncResult.get` reaches
it. A request without a result by --timeout-s after the last submit is
written with received_ns 0 (lost), unless the backend holds its result
(then it is timestamped when found, and a line on stderr says so).
"""

import argparse
import json
import sys
import threading
import time

import redis

from bench_app import app, sleep_ms, spin_ms

PREFIX = "celery-task-meta-"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--broker", required=True)
    p.add_argument("--task", choices=["sleep_ms", "spin_ms"], required=True)
    p.add_argument("--ms", type=float, required=True)
    p.add_argument("--requests", type=int, required=True)
    p.add_argument("--timeout-s", type=float, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--rate", type=float, default=0.0, help="submits per second (0: at once)")
    a = p.parse_args()
    task = {"sleep_ms": sleep_ms, "spin_ms": spin_ms}[a.task]

    received = {}  # celery task id -> (ns, status)
    lock = threading.Lock()
    listening = threading.Event()
    stop = threading.Event()

    def listen():
        r = redis.Redis.from_url(a.broker)
        ps = r.pubsub(ignore_subscribe_messages=True)
        ps.psubscribe(PREFIX + "*")
        listening.set()
        while not stop.is_set():
            m = ps.get_message(timeout=0.2)
            if m is None or m["type"] != "pmessage":
                continue
            now = time.time_ns()
            tid = m["channel"].decode()[len(PREFIX):]
            status = json.loads(m["data"]).get("status", "?")
            with lock:
                received.setdefault(tid, (now, status))
        ps.close()

    t = threading.Thread(target=listen, daemon=True)
    t.start()
    listening.wait(30)

    sent = []  # (rid, celery id, submitted ns)
    start = time.monotonic()
    for rid in range(a.requests):
        if a.rate > 0:  # paced by the clock: a late submit does not delay the next
            wait = start + rid / a.rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        ns = time.time_ns()
        res = task.apply_async(args=(rid, a.ms))
        sent.append((rid, res.id, ns))
    print("submitted", a.requests, file=sys.stderr, flush=True)

    deadline = time.monotonic() + a.timeout_s
    while time.monotonic() < deadline:
        with lock:
            if len(received) >= a.requests:
                break
        time.sleep(0.05)
    stop.set()
    t.join(5)
    # A result stored without its notification being seen (none expected):
    # ask the backend, so that `lost` means no result was stored at all.
    with lock:
        missing = [(rid, tid) for rid, tid, _ in sent if tid not in received]
    for rid, tid in missing:
        state = app.AsyncResult(tid).state
        if state in ("SUCCESS", "FAILURE"):
            received[tid] = (time.time_ns(), state)
            print(f"result of {rid} found in the backend, not notified", file=sys.stderr)
    with open(a.out, "w") as f:
        for rid, tid, ns in sent:
            got, status = received.get(tid, (0, "LOST"))
            f.write(f"{rid} {ns} {got} {status}\n")
    app.close()


if __name__ == "__main__":
    main()
