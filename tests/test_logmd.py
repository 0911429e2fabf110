"""The markdown log and `evo status` text from a small synthetic campaign."""

from __future__ import annotations

from evo.core.family import load_family
from evo.core.records import Attempt, Interval, Resources, Timing, Verdict
from evo.report.logmd import SIMULATED_BANNER, rejected_ideas, render_log, render_status, write_log

FAM = load_family("mhc_pre_big_fuse")
BASE = FAM.baseline()
G1, G2 = "T4096_H4096", "T1_H4096"


def _att(
    i: int,
    changes: dict,
    verdict: Verdict,
    parent: int | None,
    t1: float = 10.0,
    sp: float = 1.0,
    sb: float = 1.0,
    score: float | None = None,
) -> Attempt:
    g = BASE.replace(**changes)
    iv = lambda v: Interval(v, v - 0.01, v + 0.01, n=12)  # noqa: E731
    return Attempt(
        id=i,
        campaign="demo",
        family=FAM.name,
        genome=dict(g),
        genome_key=g.key,
        origin=f"mutation of #{parent}" if parent is not None else "baseline",
        parent_id=parent,
        verdict=verdict,
        score=score,
        resources={"T4096": Resources(registers=40 + i, stack_frame=96, spill_stores=i % 2)},
        timings={
            G1: Timing(t1, 0.5, 12, method="batch: graph x 64, pairs: 12, interleaved, floor: 0.05%"),
            G2: Timing(3.0, 0.8, 12, method="batch: graph x 256, pairs: 12, interleaved, floor: 0.08%"),
        },
        speedup_vs_parent={G1: iv(sp), G2: iv(1.0)},
        speedup_vs_baseline={G1: iv(sb), G2: iv(1.0)},
        roofline_pct={G1: 50.0 * sb, G2: 5.0},
        device={"sm_mhz_min": 1950 + i, "sm_mhz_max": 1980, "throttled_samples": 1 if i == 3 else 0},
        compile_s=1.25,
    )


def _campaign() -> tuple[list[Attempt], dict]:
    atts = [
        _att(0, {}, Verdict(status="baseline"), None, score=1.0),
        _att(1, {"block": 512}, Verdict.accepted("faster at every geometry"), 0, 9.0, 1.111, 1.111, 1.05),
        _att(
            2, {"block": 512, "meta": "slice"}, Verdict.rejected("correctness", "output bits differ | seed 1\nT4096"), 1
        ),
        _att(3, {"block": 512, "meta": "slice"}, Verdict.rejected("correctness", "output bits differ at seed 2"), 1),
        _att(4, {"block": 512, "unroll": 4}, Verdict.rejected("perf", "slower: 0.97x"), 1, score=0.97),
        _att(5, {"block": 512, "vec": 8}, Verdict.accepted("faster"), 1, 8.0, 1.125, 1.25, 1.1),
        _att(6, {"block": 512, "vec": 8, "h_split": 8}, Verdict.error("compile", "ptxas: too many resources"), 5),
        _att(7, {"block": 512, "vec": 8, "unroll": 2}, Verdict.rejected("static", "spills: 8 bytes"), 5),
        _att(8, {"block": 512, "vec": 8, "warp0_stream": True}, Verdict.error("interrupted", "stopped"), 5),
    ]
    meta = {
        "config": {
            "campaign": "demo",
            "family": FAM.name,
            "geometries": [
                {"name": G1, "params": {"T": 4096, "H": 4096}, "weight": 1.0},
                {"name": G2, "params": {"T": 1, "H": 4096}, "weight": 0.0},
            ],
            "gates": {"static": {"max_registers": 255}, "perf": {"min_gain": 0.01, "rule": "every"}},
            "budget": {"attempts": 20, "minutes": 8},
            "proposer": {"name": "evolutionary"},
            "backend": "recorded",
            "command": "evo run configs/demo.yaml",
        },
        "device": {
            "name": "NVIDIA H200",
            "uuid": "GPU-1234",
            "driver": "570.1",
            "cuda": "12.8",
            "nvrtc": "12.8",
            "arch": "sm_90",
        },
        "copy_ceiling": {"own_kernel_tbps": 4.1, "copyto_tbps": 4.0, "ceiling_tbps": 4.1},
        "noise_floor": {G1: 0.0008, G2: 0.0012},
        "floor": 0.0012,
        "baseline_id": 0,
        "peer_torch_compile": {G1: {"median_us": 20.0, "mode": "default"}, G2: {"error": "inductor failed"}},
        "simulated": True,
        "backend": "recorded",
        "elapsed_s": 75.0,
        "started_at": "2025-01-01T00:00:00",
    }
    return atts, meta


def _section(md: str, title: str) -> str:
    return md.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_log_sections_and_banner(tmp_path):
    atts, meta = _campaign()
    md = render_log(atts, meta)
    assert md.startswith("# Attempt log: demo (mhc_pre_big_fuse)\n")
    assert SIMULATED_BANNER in md.split("## Setup")[0]
    heads = ["## Setup", "## Peer", "## Accepted steps", "## Verdicts", "## All attempts", "## Rejected ideas"]
    pos = [md.index(h) for h in heads]
    assert pos == sorted(pos)
    setup = _section(md, "Setup")
    for s in (
        "NVIDIA H200",
        "GPU-1234",
        "sm_90",
        "4.100",
        "0.080%",
        "1950–1980 MHz",
        "Throttled samples: 1",
        "min_gain=0.01",
        "interleaved, floor: 0.05%",
    ):
        assert s in setup, s
    peer = _section(md, "Peer")
    assert "20.00 (default)" in peer and "2.500x" in peer and "error: inductor failed" in peer

    meta["simulated"] = False
    assert SIMULATED_BANNER not in render_log(atts, meta)
    out = write_log(atts, meta, tmp_path / "out" / "log.md")
    assert out.read_text() == render_log(atts, meta, plot="convergence.png")
    assert (tmp_path / "out" / "convergence.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_accepted_steps_rows():
    atts, meta = _campaign()
    steps = _section(render_log(atts, meta), "Accepted steps")
    rows = [r for r in steps.splitlines() if r.startswith("| ") and not r.startswith("| Step")]
    assert len(rows) == 3 * 2  # baseline + 2 accepted, two geometries each
    step1 = [r for r in rows if r.startswith("| 1 | #1 | T4096_H4096 |")][0]
    assert "block 256->512" in step1 and "9.00" in step1 and "1.111x [1.101, 1.121]" in step1 and "55.5%" in step1
    step2 = [r for r in rows if r.startswith("| 2 | #5 | T4096_H4096 |")][0]
    assert "vec 16->8" in step2 and "block" not in step2 and "1.250x" in step2
    assert any("T1_H4096 (watched)" in r for r in rows)


def test_verdicts_all_attempts_and_rejected_ideas():
    atts, meta = _campaign()
    md = render_log(atts, meta)
    verdicts = _section(md, "Verdicts")
    assert "| rejected: correctness | 2 |" in verdicts and "| accepted | 2 |" in verdicts
    table = _section(md, "All attempts")
    assert "output bits differ \\| seed 1 T4096" in table
    assert "Change vs champion then" in table and "Change vs parent" not in table
    assert "| #4 | mutation of #1 | #1 | unroll 1->4 | rejected: perf |" in table
    assert "| 0.970 | 10.00 | 50.0% | 44/96/0 | 1.25 |" in table and "45/96/1" in table  # µs, % at T4096_H4096
    assert "| #5 | mutation of #1 | #1 | vec 16->8 | accepted | faster | 1.100 | 8.00 | 62.5% |" in table

    groups = rejected_ideas(atts, meta)
    assert [g["change"] for g in groups][0] == "meta=slice"
    assert groups[0]["count"] == 2 and groups[0]["gates"]["rejected: correctness"] == 2
    assert {g["change"] for g in groups} == {"meta=slice", "unroll=4", "h_split=8", "unroll=2"}  # no interrupted
    rej = _section(md, "Rejected ideas")
    assert "tried and failed a gate" in rej and "evo replay" in rej
    assert "| meta=slice | 2 | rejected: correctness ×2 |" in rej
    assert "error: compile ×1" in rej


def test_status_text():
    atts, meta = _campaign()
    s = render_status(atts, meta)
    for part in (
        "demo",
        "mhc_pre_big_fuse",
        "simulated from recorded H200 measurements",
        "9 recorded",
        "accepted 2",
        "champion: #5 (block 256->512, vec 16->8)",
        "1.250x [1.240, 1.260]",
        "1m 15s",
    ):
        assert part in s, part


def test_empty_and_partial():
    for meta in ({}, {"config": {}}, {"simulated": False}):
        md = render_log([], meta)
        assert "## Accepted steps" in md and "## Rejected ideas" in md
        assert render_status([], meta)
    # attempts without any meta, no accepted step, odd parents
    atts, _ = _campaign()
    lone = atts[:1] + [atts[4]]
    lone[1].parent_id = 42
    md = render_log(lone, {})
    assert "the baseline is the champion" in md
    assert "unroll=4" in _section(md, "Rejected ideas")  # missing parent falls back to the baseline
    assert "champion: #0 (baseline)" in render_status(lone, {})


def test_accepted_steps_say_bit_identical_or_tolerance():
    """Each step's output: the baseline's hashes (bit-identical) or its error against float64 (tolerance)."""
    atts, meta = _campaign()
    same = {G1: {"0/y": "a" * 64}, G2: {"0/y": "b" * 64}}
    atts[0].output_hashes = same
    atts[1].output_hashes = dict(same)
    atts[5].output_hashes = {G1: {"0/y": "c" * 64}, G2: same[G2]}
    atts[5].error_vs_ref = {G1: {"y.rel_err": 3.5e-6}}
    rows = [r for r in _section(render_log(atts, meta), "Accepted steps").splitlines() if r.startswith("| ")]
    assert rows[0].endswith("| Output vs baseline |")
    assert [r.rsplit("|", 2)[1].strip() for r in rows[1:]] == [
        "reference hashes",
        "reference hashes",
        "bit-identical",
        "bit-identical",
        "tolerance: rel err 3.50e-06",
        "bit-identical",
    ]
    assert "55.5% (1.80x floor)" in rows[3]  # at 55.5% of the copy ceiling it takes 1/0.555 of the floor time


def test_copy_ceiling_line_names_its_method():
    atts, meta = _campaign()
    line = next(ln for ln in render_log(atts, meta).splitlines() if ln.startswith("- Copy ceiling"))
    assert line.endswith("copyto 4.000 TB/s)"), line  # a ledger from before session 11: figures only
    meta["copy_ceiling"] = {
        "own_kernel_tbps": 3.9,
        "copyto_tbps": 4.2,
        "ceiling_tbps": 4.2,
        "method": "best of 3 trials, 10 copies of 4 GiB each",
        "trials": [
            {"own_kernel_tbps": 3.9, "copyto_tbps": 4.15},
            {"own_kernel_tbps": 3.85, "copyto_tbps": 4.2},
            {"own_kernel_tbps": 3.8, "copyto_tbps": 4.1},
        ],
    }
    line = next(ln for ln in render_log(atts, meta).splitlines() if ln.startswith("- Copy ceiling"))
    assert line.endswith("copyto 4.200 TB/s; best of 3 trials, 10 copies of 4 GiB each, trials 4.100-4.200 TB/s)"), line


def test_the_log_never_cuts_a_number():
    """A long reason is cut at a space, never inside a number (the log once showed `[0.942, 0.…`)."""
    from evo.report.logmd import _short

    reason = "slower than the champion: weighted 0.981x [0.942, 0.995] needs > 1.0131 " * 6
    for n in range(20, 200):
        cut = _short(reason, n)
        assert len(cut) <= n and cut.endswith("…"), cut
        body = cut[:-1]
        assert reason.startswith(body) and reason[len(body)] in " ,;:([]", (n, cut)  # it ends where a word ends


def test_converged_note_after_many_attempts_without_a_new_champion():
    from evo.report.converged import CONVERGED_AFTER

    atts, meta = _campaign()
    assert "converged" not in render_status(atts, meta) and "converged" not in render_log(atts, meta)
    tail = [
        _att(9 + i, {"block": 512, "vec": 8, "unroll": 4}, Verdict.rejected("perf", "slower: 0.99x"), 5, score=0.99)
        for i in range(CONVERGED_AFTER)
    ]
    status = render_status(atts + tail, meta)
    # the interrupted #8 is not counted: CONVERGED_AFTER + #6, #7
    want = f"converged: the last {CONVERGED_AFTER + 2} attempts in a row brought no new champion (champion #5)"
    assert want in status
    assert "converged: the last" in _section(render_log(atts + tail, meta), "Convergence")


def test_the_plot_legend_counts_as_status_does_and_names_every_verdict_class(tmp_path):
    """Issue 43: the legend said "accepted (4)" where status says "accepted 3, baseline 1", dropped static rejections
    silently and left rejected points above the champion line unexplained."""
    from evo.core.records import BASELINE, Attempt, Code, Verdict
    from evo.report.logmd import convergence_plot, render_status
    from evo.report.plot_legend import legend, unplotted

    def att(i: int, v: Verdict, score: float | None) -> Attempt:
        return Attempt(i, "c", "f", {"block": i}, str(i), verdict=v, score=score)

    atts = [att(0, Verdict(BASELINE, reason="b"), 1.0)]
    atts += [att(i, Verdict.accepted("faster"), 1.0 + i / 10) for i in (1, 2, 3)]
    atts += [att(i, Verdict.rejected("perf", "lost the rounds", Code.PERF_SLOWER), 1.5) for i in (4, 5)]
    atts += [att(6, Verdict.rejected("perf", "early", Code.PERF_EARLY_STOP), 0.9)]
    atts += [att(i, Verdict.rejected("static", "spills"), None) for i in (7, 8)]
    atts += [att(9, Verdict.error("compile", "kernel.cu(3): error"), None)]
    labels = [label for _, label, _ in legend(atts)]
    assert labels[:2] == ["baseline (1)", "accepted (3)"]
    assert labels[2].startswith("rejected, measured in full") and "above the line" in labels[2] and "(2)" in labels[2]
    assert labels[3].startswith("stopped early") and "(1)" in labels[3]
    rest = unplotted(atts)
    assert rest is not None and "(3)" in rest and "rejected: static 2" in rest and "error: compile 1" in rest
    assert sum(n for *_, n in legend(atts)) + 3 == len(atts)  # every attempt in one entry
    status = render_status(atts, {})
    assert "accepted 3" in status and "baseline 1" in status
    assert convergence_plot(atts, {}, tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
