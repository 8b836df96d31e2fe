"""A deployment as `EVENTQ_PROCESSES=N make run` makes one (`eventq up --processes N`:
one local broker, N eventq processes on consecutive ports, make run's defaults), on free
ports and a directory of its own: what the user-scenario benchmarks run against
(bench/paused_owner.py, bench/planned_restart.py)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

from eventq.settings import Settings
from tools.ports import consecutive_free_ports
from tools.servers import raw_exchange

ROOT = Path(__file__).resolve().parents[1]
PARTITIONS = Settings().partitions  # make run's default
READY_TIMEOUT_S = 240.0
STOP_TIMEOUT_S = 120.0
POLL_S = 0.2


def serving(port: int) -> bool:
    """The process on ``port`` answers a digest: every partition of its group is served."""
    try:
        return raw_exchange(port, b"inspect digest\r\n", timeout_s=3).startswith(b"+OK")
    except OSError:
        return False


def serve_pids(parent: int, listen_port: int) -> list[int]:
    """Pids of the `eventq serve` children of ``parent`` listening on ``listen_port``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            arguments = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            ppid = int((entry / "stat").read_text().rsplit(") ", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if (ppid == parent and "serve" in arguments and "--listen-port" in arguments
                and arguments[arguments.index("--listen-port") + 1] == str(listen_port)):
            found.append(int(entry.name))
    return found


class UpRun:
    """`eventq up` with ``processes`` processes in ``run_dir`` until ``stop``."""

    def __init__(self, run_dir: Path, processes: int, partitions: int = PARTITIONS,
                 source: Path = ROOT) -> None:
        self.run_dir = run_dir
        self.source = source  # the checkout whose code runs (another revision: before)
        first = consecutive_free_ports(processes)
        self.ports = [first + i for i in range(processes)]
        kafka = consecutive_free_ports(2)
        self.bootstrap = f"127.0.0.1:{kafka}"
        self.partitions = partitions
        self.flags = ["--data-dir", str(run_dir), "--listen-port", str(first),
                      "--kafka-port", str(kafka), "--controller-port", str(kafka + 1),
                      "--processes", str(processes), "--partitions", str(partitions),
                      "--http-port", "127.0.0.1:0"]
        self.log_path = run_dir / "up.log"
        self.up: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            self.up = subprocess.Popen([sys.executable, "-m", "eventq.cli", "up", *self.flags],
                                       stdout=log, stderr=subprocess.STDOUT, cwd=self.source)
        await self.wait_serving(self.ports)

    async def wait_serving(self, ports: list[int]) -> float:
        """Until every process of ``ports`` serves; the seconds it took."""
        assert self.up is not None
        began = time.monotonic()
        deadline = began + READY_TIMEOUT_S
        while not all(await asyncio.gather(*(asyncio.to_thread(serving, p) for p in ports))):
            if self.up.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("eventq up did not serve:\n" + self.log_tail())
            await asyncio.sleep(POLL_S)
        return time.monotonic() - began

    def serve_pid(self, index: int) -> int:
        assert self.up is not None
        pids = serve_pids(self.up.pid, self.ports[index])
        if not pids:
            raise LookupError(f"no eventq serve on port {self.ports[index]}")
        return pids[0]

    async def wait_restarted(self, index: int, old_pid: int) -> int:
        """Until `eventq up` has started process ``index`` again (a new pid); that pid."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            try:
                pid = self.serve_pid(index)
                if pid != old_pid:
                    return pid
            except LookupError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"process {index} was not started again:\n" + self.log_tail())
            await asyncio.sleep(POLL_S)

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        if self.up is None or self.up.poll() is not None:
            return
        self.up.send_signal(2)  # SIGINT: `eventq up` stops its processes and Kafka
        try:
            self.up.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.up.kill()
