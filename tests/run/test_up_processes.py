"""`eventq up --processes N`: each process's flags (eventq/run/up.py)."""

from __future__ import annotations

from pathlib import Path

from eventq.run.up import process_settings
from eventq.settings import Settings


def flag(flags: list[str], name: str) -> str:
    return flags[flags.index(name) + 1]


def test_each_process_gets_its_own_port_and_data_dir_and_the_shared_rest() -> None:
    settings = Settings(data_dir=Path("/tmp/eq"), brokers=3, processes=3, listen_port=9922,
                        partitions=12, kafka_port=19092, controller_port=19093)
    flags = [process_settings(settings, i) for i in range(3)]
    assert [flag(f, "--listen-port") for f in flags] == ["9922", "9923", "9924"]
    assert [flag(f, "--data-dir") for f in flags] == [
        "/tmp/eq/process-1", "/tmp/eq/process-2", "/tmp/eq/process-3"]
    for f in flags:
        assert flag(f, "--partitions") == "12"
        assert flag(f, "--bootstrap") == "127.0.0.1:19092,127.0.0.1:19094,127.0.0.1:19096"
        assert "--processes" not in f and "--advertise" not in f


def test_an_advertised_host_keeps_its_name_with_each_port() -> None:
    settings = Settings(bootstrap="k1:9092", processes=2, listen_port=7000,
                        advertise="box.example:7000")
    flags = [process_settings(settings, i) for i in range(2)]
    assert [flag(f, "--advertise") for f in flags] == ["box.example:7000", "box.example:7001"]
    assert all(flag(f, "--bootstrap") == "k1:9092" for f in flags)


def test_each_process_gets_its_own_dashboard_port_from_the_given_one() -> None:
    settings = Settings(processes=3, http_port="0.0.0.0:9980")
    flags = [process_settings(settings, i) for i in range(3)]
    assert [flag(f, "--http-port") for f in flags] == [
        "0.0.0.0:9980", "0.0.0.0:9981", "0.0.0.0:9982"]
    off = Settings(processes=2, http_port="off")
    assert [flag(process_settings(off, i), "--http-port") for i in range(2)] == ["off", "off"]
    any_port = Settings(processes=2, http_port="127.0.0.1:0")
    assert flag(process_settings(any_port, 1), "--http-port") == "127.0.0.1:0"


def test_one_process_keeps_the_data_dir_and_the_advertised_address_as_given() -> None:
    settings = Settings(data_dir=Path("/tmp/eq"), listen_port=9922, advertise="box:7000")
    flags = process_settings(settings, 0)
    assert flag(flags, "--data-dir") == "/tmp/eq"  # make run's var/state stays where it was
    assert flag(flags, "--listen-port") == "9922"
    assert flag(flags, "--advertise") == "box:7000"
    assert "--processes" not in flags


def test_a_process_that_exits_with_status_2_is_said_to_have_failed_at_start() -> None:
    import signal

    from eventq.run.up import ServeProcess

    class Ended:
        pid = 4242

        def __init__(self, code: int) -> None:
            self.code = code

        def poll(self) -> int:
            return self.code

    child = ServeProcess(Settings(listen_port=9923), 0)
    child.process = Ended(2)
    assert child.exit_reason().startswith("failed at start (status 2")
    assert child.name == "eventq process on port 9923 (pid 4242)"
    child.process = Ended(-signal.SIGKILL)
    assert child.exit_reason() == "was killed by SIGKILL"
