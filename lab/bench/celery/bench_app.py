"""The Celery app of `tidepool-bench celery`: two tasks that record their
start and finish in a journal, configured for at-least-once delivery.

Environment: BENCH_BROKER (redis://127.0.0.1:PORT/0, also the result
backend), BENCH_RECORD (the journal file), BENCH_READY (a file created when
the worker is ready), BENCH_REDELIVER_S (the visibility timeout, seconds).

Settings and what each does for the lost / ran-twice counts when a worker
is killed with SIGKILL:
- task_acks_late: the message is acknowledged after the task returns, so
  the tasks a killed worker was running (or had reserved) stay unacked and
  are redelivered instead of lost; a task that finished but was not yet
  acknowledged when the worker died runs twice.
- worker_prefetch_multiplier = 1: each pool slot reserves at most one
  message ahead, so a dead worker holds few messages hostage until the
  visibility timeout returns them.
- task_reject_on_worker_lost: when a pool child dies under a live worker,
  its message is requeued (run again) rather than failed; it does not apply
  when the whole worker is killed (nothing is left to reject it: the
  visibility timeout returns the message).
- visibility_timeout (Redis transport): how long an unacked message waits
  before any worker restores it, the counterpart of JetStream's ack wait;
  the restore sweep runs every second (unacked_restore_interval and
  unacked_restore_throttle), not every 100 s.
"""

import os
import time

from celery import Celery
from celery.signals import worker_ready

BROKER = os.environ.get("BENCH_BROKER", "redis://127.0.0.1:6379/0")
REDELIVER_S = float(os.environ.get("BENCH_REDELIVER_S", "5"))

app = Celery("bench_app", broker=BROKER, backend=BROKER)
app.conf.update(
    task_acks_late=True,
    worker_prefetch_multiplier=1,
    task_reject_on_worker_lost=True,
    broker_transport_options={
        "visibility_timeout": REDELIVER_S,
        "unacked_restore_interval": 1,
        "unacked_restore_throttle": 1,
    },
    broker_connection_retry_on_startup=True,
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    worker_hijack_root_logger=False,
)

_journal = {"pid": None, "fd": None}


def _record(kind, rid):
    """Append `S rid` or `F rid` with one write(2) (atomic with O_APPEND)."""
    if _journal["pid"] != os.getpid():  # a prefork child opens its own fd
        _journal["fd"] = os.open(
            os.environ["BENCH_RECORD"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644
        )
        _journal["pid"] = os.getpid()
    os.write(_journal["fd"], f"{kind} {rid}\n".encode())


@app.task(name="sleep_ms")
def sleep_ms(rid, ms):
    """Blocking work: sleep `ms` milliseconds."""
    _record("S", rid)
    time.sleep(ms / 1000.0)
    _record("F", rid)
    return rid


@app.task(name="spin_ms")
def spin_ms(rid, ms):
    """Computation: burn `ms` milliseconds of this thread's CPU time."""
    _record("S", rid)
    end = time.thread_time() + ms / 1000.0
    while time.thread_time() < end:
        pass
    _record("F", rid)
    return rid


@worker_ready.connect
def _ready(**_):
    path = os.environ.get("BENCH_READY")
    if path:
        with open(path, "w") as f:
            f.write("ready\n")
