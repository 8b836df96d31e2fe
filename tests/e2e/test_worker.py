"""The worker runtime against a live server: many jobs done once each, leases kept alive
by touch, a killed worker's job done by another, external programs (success, failure,
timeout, huge output), and SIGTERM's drain."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from eventq.client import Client, NewJob
from eventq.worker import Worker

pytestmark = pytest.mark.kafka

PYTHON = sys.executable


def queue(label: str) -> str:
    return f"{label}-{time.monotonic_ns()}"


class Running:
    """A Worker serving in a thread of the test (stopped with ``stop``, or on leaving
    a ``with``)."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.thread = threading.Thread(target=worker.run, daemon=True)
        self.thread.start()

    def stop(self, timeout_s: float = 30) -> None:
        self.worker.stop()
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), "the worker did not stop"

    def __enter__(self) -> "Running":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def wait_for(predicate, timeout_s: float = 60, every_s: float = 0.05):
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(every_s)
    return value


MANY_JOBS = 500  # 60 and more for each of the 8 handlers; jobs/s is bench/worker_bench.py's


def test_eight_handlers_do_many_jobs_once_each(server):
    q = queue("many")
    handled: list = []
    lock = threading.Lock()
    worker = Worker(port=server.port, concurrency=8)

    @worker.handler(q)
    def handle(job):
        with lock:
            handled.append(job.id)
        return job.payload

    with Client(port=server.port) as client:
        ids = client.add_many(NewJob(q, b"%d" % n, ttr_ms=30_000) for n in range(MANY_JOBS))
        running = Running(worker)
        try:
            wait_for(lambda: worker.tally.done >= MANY_JOBS, timeout_s=180)
        finally:
            running.stop()
        assert sorted(handled) == sorted(ids)  # every job, none twice
        assert worker.tally.failed == worker.tally.lost == 0
        for n, job_id in enumerate(ids):
            assert client.result(job_id).data == b"%d" % n
        assert client.inspect_queue(q).ready == 0


def pid_of_handler(job) -> str:
    return str(os.getpid())  # module level: a process pool pickles it by name


def test_cpu_bound_handlers_run_in_a_process_pool(server):
    q = queue("cpu")
    worker = Worker(port=server.port, concurrency=2, processes=True)
    worker.add_handler(q, pid_of_handler)
    with Client(port=server.port) as client:
        ids = client.add_many(NewJob(q, b"") for _ in range(20))
        running = Running(worker)
        try:
            pids = {client.result(job_id, wait_timeout_ms=30_000).text for job_id in ids}
        finally:
            running.stop()
    assert str(os.getpid()) not in pids and 1 <= len(pids) <= 2


def test_a_long_job_outlives_its_ttr_because_of_touch(server):
    q = queue("long")
    worker = Worker(port=server.port, concurrency=1)

    @worker.handler(q)
    async def slow(job):
        await asyncio.sleep(5)  # five times its TTR
        return "finally"

    with Client(port=server.port) as client:
        job_id = client.add(q, b"x", ttr_ms=1_000)
        running = Running(worker)
        try:
            result = client.result(job_id, wait_timeout_ms=20_000)
        finally:
            running.stop()
        assert result.data == b"finally"
        assert client.inspect_job(job_id).attempts == 1  # never timed out


def worker_process(server, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [PYTHON, "-m", "eventq.cli", "worker", "--server", f"127.0.0.1:{server.port}", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def test_a_killed_workers_job_times_out_and_another_worker_does_it(server):
    q = queue("killed")
    with Client(port=server.port) as client:
        job_id = client.add(q, b"x", ttr_ms=1_000)
        first = worker_process(server, "--queue", q, "--timeout-ms", "60000", "--",
                               "sleep", "8")
        try:
            wait_for(lambda: client.inspect_job(job_id).state == "leased", timeout_s=30)
            time.sleep(2.5)  # past its TTR: the heartbeat holds the lease
            assert client.inspect_job(job_id).state == "leased"
        finally:
            first.kill()  # kill -9: no more touches, nobody reports
            first.wait(10)
        second = Worker(port=server.port, concurrency=1)
        second.add_handler(q, lambda job: "done by the second")
        running = Running(second)
        try:
            result = client.result(job_id, wait_timeout_ms=20_000)
        finally:
            running.stop()
        assert result.data == b"done by the second"
        assert client.inspect_job(job_id).attempts == 2


UPPER = [PYTHON, "-c", "import sys; sys.stdout.write(sys.stdin.read().upper())"]
FAILS = ["sh", "-c", "echo starting; echo 'no such image' >&2; exit 3"]
HANGS = ["sleep", "30"]
FLOODS = [PYTHON, "-c", "import sys; sys.stdout.write('x' * 2_000_000)"]


def test_external_programs_success_failure_timeout_and_huge_output(server):
    names = {label: queue(label) for label in ("upper", "fails", "hangs", "floods")}
    worker = Worker(port=server.port, concurrency=4)
    for label, argv in (("upper", UPPER), ("fails", FAILS), ("hangs", HANGS),
                        ("floods", FLOODS)):
        worker.add_program(names[label], argv)
    with Client(port=server.port) as client:
        ids = {label: client.add(name, b"resize me", ttr_ms=1_500, max_fails=1)
               for label, name in names.items()}
        running = Running(worker)
        try:
            results = {label: client.result(job_id, wait_timeout_ms=30_000)
                       for label, job_id in ids.items()}
        finally:
            running.stop()
    assert (results["upper"].ok, results["upper"].data) == (True, b"RESIZE ME")
    assert not results["fails"].ok
    assert results["fails"].data == b"exit status 3: no such image\n"
    assert not results["hangs"].ok
    assert results["hangs"].text.startswith("killed: still running after its time limit of 1.5s")
    assert not results["floods"].ok
    assert "2,000,000 bytes, over the result limit" in results["floods"].text


def test_sigterm_lets_running_jobs_finish_and_leases_nothing_new(server):
    q = queue("drain")
    with Client(port=server.port) as client:
        first = client.add(q, b"x", ttr_ms=10_000)
        process = worker_process(server, "--queue", q, "--concurrency", "1", "--",
                                 "sh", "-c", "sleep 2; echo finished")
        try:
            wait_for(lambda: client.inspect_job(first).state == "leased", timeout_s=30)
            process.send_signal(signal.SIGTERM)
            later = client.add(q, b"y", ttr_ms=10_000)
            _, stderr = process.communicate(timeout=30)
        finally:
            process.kill()
        assert process.returncode == 0, stderr
        assert client.result(first).data == b"finished\n"
        assert client.inspect_job(later).state == "new"  # not leased after SIGTERM
        assert f"job {first} queue={q} attempt=1 duration=" in stderr
        assert "outcome=completed" in stderr


def test_a_second_sigterm_ends_running_jobs_with_a_clear_result(server, tmp_path: Path):
    q = queue("abort")
    started = tmp_path / "started"
    with Client(port=server.port) as client:
        job_id = client.add(q, b"x", ttr_ms=60_000, max_fails=1)
        process = worker_process(server, "--queue", q, "--",
                                 "sh", "-c", f"touch {started}; exec sleep 30")
        try:
            # Running, not only leased: a stop while the lease's reply is on its way
            # abandons the lease, and the job waits out its TTR (CI failed so once,
            # with the result -TIMEOUT, beside a fault campaign).
            wait_for(started.exists, timeout_s=30)
            process.send_signal(signal.SIGTERM)
            time.sleep(0.5)
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=30)
        finally:
            process.kill()
        assert process.returncode == 0, stderr
        result = client.result(job_id)
        assert not result.ok and "second stop signal" in result.text


def test_the_worker_cli_loads_a_python_worker(server, tmp_path: Path):
    q = queue("app")
    (tmp_path / "jobs_app.py").write_text(
        "from eventq.worker import Worker\n"
        "worker = Worker(concurrency=2)\n"
        f"@worker.handler({q!r})\n"
        "def shout(job):\n"
        "    return job.text + '!'\n"
    )
    with Client(port=server.port) as client:
        job_id = client.add(q, "hey")
        process = subprocess.Popen(
            [PYTHON, "-m", "eventq.cli", "worker", "--server", f"127.0.0.1:{server.port}",
             "--app", "jobs_app:worker"],
            cwd=tmp_path, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
        )
        try:
            assert client.result(job_id, wait_timeout_ms=30_000).data == b"hey!"
        finally:
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=30)
        assert process.returncode == 0
