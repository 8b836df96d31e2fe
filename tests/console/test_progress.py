"""The progress bar: counts, rate and ETA; in place on a terminal, plain lines elsewhere."""

from __future__ import annotations

import io

from eventq.console.progress import Progress, format_duration, render


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_render_with_a_total():
    line = render("publishing", 250, 1000, "jobs", 2.0)
    assert line.startswith("publishing")
    assert "[######------------------]" in line and " 25%" in line
    assert "250/1,000 jobs" in line and "125 jobs/s" in line and "ETA 6s" in line


def test_render_with_a_fraction_and_no_total():
    line = render("reading", 50_000, None, "records", 1.0, fraction=0.5, extra="x")
    assert "50%" in line and "50,000 records" in line and "50,000 records/s" in line
    assert "ETA 1s" in line and line.endswith("x")
    done = render("reading", 10, None, "records", 2.0)
    assert "%" not in done and "5 records/s" in done and "2.0s" in done


def test_durations():
    assert [format_duration(s) for s in (0, 59.4, 61, 3599, 3600 * 2 + 65)] == [
        "0s", "59s", "1m01s", "59m59s", "2h01m",
    ]  # fmt: skip


def test_on_a_terminal_the_line_is_redrawn_in_place():
    out, clock = Terminal(), FakeClock()
    p = Progress(out, clock=clock, interval=0.1)
    p.start("reading", 100, "records")
    clock.now += 0.05
    p.update(10)  # too soon: nothing drawn
    assert out.getvalue() == ""
    clock.now += 0.1
    p.update(20)
    p.message("corrupt record: x")
    clock.now += 0.2
    p.update(40)
    clock.now += 0.2
    p.finish(100)
    text = out.getvalue()
    assert text.startswith("\rreading") and "\x1b[K" in text
    assert "\r\x1b[Kcorrupt record: x\n" in text  # the bar is cleared for a message
    assert text.endswith("\n") and text.count("\n") == 2
    assert "100/100 records" in text.splitlines()[-1]


def test_elsewhere_only_plain_lines():
    out, clock = io.StringIO(), FakeClock()
    p = Progress(out, clock=clock, plain_interval=10)
    p.start("publishing", 10, "jobs")
    for i in range(10):
        clock.now += 0.5
        p.update(i)
    p.finish(10)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and "\r" not in out.getvalue()
    assert "10/10 jobs" in lines[0] and "2 jobs/s" in lines[0]


def test_disabled_writes_nothing_but_messages():
    out = Terminal()
    p = Progress(out, enabled=False)
    p.start("reading")
    p.update(5)
    assert p.finish(5) >= 0
    assert out.getvalue() == ""
    p.message("corrupt record: y")
    assert out.getvalue() == "corrupt record: y\n"
