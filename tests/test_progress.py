"""The live view (evo/report/progress.py) at a fixed console width: change, time, verdict, champion, elapsed and
budget."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
from rich.console import Console

from evo.core.family import Geometry
from evo.core.records import BASELINE, Attempt, Interval, Timing, Verdict
from evo.report.progress import Progress


def _att(i, genome, verdict, us=None, vs=None, vb=None):
    a = Attempt(i, "t", "f", genome, str(genome), verdict=verdict)
    if us is not None:
        a.timings = {"T4096_H4096": Timing(us, 0.1, 12)}
    if vs is not None:
        a.speedup_vs_parent = {"T4096_H4096": Interval(vs, vs - 0.01, vs + 0.01)}
    if vb is not None:
        a.speedup_vs_baseline = {"T4096_H4096": Interval(vb, vb - 0.01, vb + 0.01)}
    return a


@pytest.mark.parametrize("width", [80, 120])
def test_live_view_fits_the_width_and_says_what_each_attempt_did(width):
    now = [100.0]
    console = Console(width=width, file=io.StringIO(), force_terminal=True, color_system=None, record=True)
    lines_out = Console(file=io.StringIO())  # where the attempts' plain lines go (not under test here)
    geoms = [Geometry("T4096_H4096", {}, 1.0), Geometry("T1_H4096_S32", {}, 0.0)]
    p = Progress(
        "mhc_pre_big_fuse",
        SimpleNamespace(attempts=150, minutes=8),
        False,
        console=lines_out,
        geometries=geoms,
        elapsed_before=60.0,
        clock=lambda: now[0],
    )
    p.live_mode = False
    p._live = None
    base = {"block": 256, "vec": 8}
    p(_att(0, base, Verdict(BASELINE, reason="the portable baseline"), 94.18))
    p(_att(1, {"block": 128, "vec": 8}, Verdict.accepted("faster than the champion: " + "x" * 200), 66.8, 1.41, 1.41))
    long_reason = "slower than the champion at T4096_H4096 in all of the first 6 pairs " + "y" * 300
    p(_att(2, {"block": 128, "vec": 16}, Verdict.rejected("perf", long_reason), 70.1, 0.953))
    now[0] += 95.0
    console.print(p.render())
    text = console.export_text()
    lines = text.splitlines()
    assert all(len(ln) <= width for ln in lines), max(len(ln) for ln in lines)
    assert "3/150 attempts (147 left)" in text
    assert "elapsed 2m35s of 8 min (5m25s left)" in text
    assert "#1: 66.80 µs at T4096_H4096; vs baseline T4096_H4096 1.410x" in text
    row = next(ln for ln in lines if ln.lstrip("│ ").startswith("2 "))
    # its change against the champion it was measured against (#1), its time, ratio and verdict
    assert "vec 8->16" in row and "block" not in row and "70.10" in row and "0.953x" in row
    below = lines[lines.index(row) + 1]  # narrow: the reason on a line of its own
    assert "rejected: perf" in row and ("…" in row if width >= 120 else "…" in below and "slower than" in below)
    assert "block 256->1" in next(ln for ln in lines if ln.lstrip("│ ").startswith("1 "))


def test_resumed_campaign_counts_its_earlier_attempts():
    console = Console(width=100, file=io.StringIO(), force_terminal=True, color_system=None, record=True)
    p = Progress(
        "c",
        SimpleNamespace(attempts=10, minutes=None),
        True,
        console=Console(file=io.StringIO()),
        counted_before=[0, 1, 2],
    )
    p.live_mode, p._live = False, None
    p(_att(0, {"b": 1}, Verdict(BASELINE)))  # the baseline, announced again: counted once
    p(_att(3, {"b": 2}, Verdict.rejected("perf", "not faster"), 5.0, 0.99))
    console.print(p.render())
    text = console.export_text()
    assert "4/10 attempts (6 left)" in text and "simulated from recorded H200 measurements" in text


@pytest.mark.parametrize("width", [80, 100, 150])
def test_live_view_keeps_60_characters_of_each_reason(width):
    """Issue 43: at 80 columns the reason column kept ~15 characters of a verdict's reason, where the reason is what
    says why; now a line of its own under the attempt's row below 120 columns, two thirds of the rest above."""
    console = Console(width=width, file=io.StringIO(), force_terminal=True, color_system=None, record=True)
    p = Progress("mhc_pre_big_fuse", SimpleNamespace(attempts=150, minutes=8), False, console=console)
    p.live_mode = False
    p.console = Console(file=io.StringIO())  # the attempts' plain lines (not under test here)
    reasons = [
        "the portable baseline; its output hashes are frozen as the reference",
        "faster than the champion: weighted 1.407x [1.402, 1.410] (needs > 1.0131)",
        "slower than the champion in the weighted mean of each of the first 6 rounds of T4096_H7168",
    ]
    p(_att(0, {"block": 256, "vec": 8}, Verdict(BASELINE, reason=reasons[0]), 94.18))
    p(_att(1, {"block": 128, "vec": 8}, Verdict.accepted(reasons[1]), 66.8, 1.41, 1.41))
    p(_att(2, {"block": 128, "vec": 16}, Verdict.rejected("perf", reasons[2]), 70.1, 0.953))
    console.print(p.render())
    text = console.export_text()
    assert all(len(ln) <= width for ln in text.splitlines())
    for r in reasons:
        assert r[:60] in text, (r[:60], text)
    row = next(ln for ln in text.splitlines() if ln.lstrip("│ ").startswith("2 "))
    assert "vec 8->16" in row and "70.10" in row and "0.953x" in row and "rejected: perf" in row


def test_plain_lines_show_the_change_against_the_same_champion_as_the_live_view_and_the_log():
    """Issue 43: --plain showed the change against the baseline, the live view and the log against the champion."""
    plain = Console(width=200, file=io.StringIO(), color_system=None, record=True)
    p = Progress("mhc_pre_big_fuse", SimpleNamespace(attempts=150, minutes=8), False, console=plain)
    p.live_mode = False
    p(_att(0, {"block": 256, "vec": 8}, Verdict(BASELINE, reason="the portable baseline"), 94.18))
    p(_att(1, {"block": 128, "vec": 8}, Verdict.accepted("faster"), 66.8, 1.41, 1.41))
    later = _att(2, {"block": 128, "vec": 16}, Verdict.rejected("perf", "slower"), 70.1, 0.953)
    later.parent_id = 1
    p(later)
    line = next(ln for ln in plain.export_text().splitlines() if ln.startswith("#2 "))
    assert "vec 8->16" in line and "block" not in line, line
    assert p.recent[-1][1] == "vec 8->16"  # the live view's change
