"""gates.perf.ceiling_check (evo/measure/ceiling.py): at the end of a run the champion and the copy ceiling are measured
alternately; the ratios, their record in the ledger, the log's section, and a failure that loses nothing."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from evo.config import ConfigError, load_config
from evo.loop.campaign import Campaign
from evo.measure import ceiling
from evo.report.logmd import render_log
from harness.recorded import RecordedBackend

ROOT = Path(__file__).resolve().parent.parent
FP4 = ROOT / "configs" / "fp4_matvec.yaml"


def _config(tmp_path: Path, attempts: int, perf_tail: str = "") -> Path:
    text = FP4.read_text().replace("rule: every}", f"rule: every{perf_tail}}}")
    text = re.sub(r"^budget: .*$", f"budget: {{attempts: {attempts}}}", text, flags=re.M)
    text = re.sub(r"^backend: .*$", "backend: recorded", text, flags=re.M)
    text += f"storage: sqlite:///{tmp_path / 'c.db'}\n"
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


def test_ratios_are_each_alternations_own():
    nbytes = 70_000_000
    trials = [
        {"ceiling_tbps": 4.0, "us": {"a": 20.0, "b": None}},
        {"ceiling_tbps": 4.4, "us": {"a": 20.0, "b": None}},
        {"ceiling_tbps": 4.2, "us": {"a": 21.0, "b": 5.0}},
    ]
    s = ceiling.summarize(trials, {"a": nbytes, "b": 1_000_000})
    own = sorted(100 * nbytes / (us * 1e-6) / (c * 1e12) for us, c in ((20.0, 4.0), (20.0, 4.4), (21.0, 4.2)))
    assert s["a"]["pct_median"] == pytest.approx(own[1])
    assert (s["a"]["pct_min"], s["a"]["pct_max"]) == (pytest.approx(own[0]), pytest.approx(own[2]))
    assert s["a"]["us_median"] == 20.0 and s["a"]["ceiling_median_tbps"] == 4.2
    assert (s["b"]["alternations"], s["b"]["unmeasured"]) == (1, 2)
    lines = ceiling.describe({"geometries": s})
    assert lines[0].startswith("a: 20.00 µs, 79.5% of the copy ceiling (alternations 79.4-87.5%")
    assert "1 of 3 measured" in lines[1]
    trials[0]["first"], trials[1]["first"], trials[2]["first"] = "ceiling", "champion", "ceiling"
    s = ceiling.summarize(trials, {"a": nbytes})
    assert (s["a"]["us_median_ceiling_first"], s["a"]["us_median_champion_first"]) == (20.5, 20.0)
    assert ceiling.describe({"geometries": s})[0].endswith(
        "3 of 3 measured; right after the copies 20.50 µs, before them 20.00 µs)"
    )
    none = ceiling.summarize([{"ceiling_tbps": 4.0, "us": {"a": None}}], {"a": nbytes})
    assert ceiling.describe({"geometries": none}) == ["a: no alternation measured (every round throttled)"]
    assert ceiling.describe({"error": "KernelCrash: boom"}) == ["not measured: KernelCrash: boom"]


def test_alternations_swap_which_comes_first():
    calls = []

    class Backend:
        def copy_ceiling(self, **kw):
            calls.append(("ceiling", kw))
            return {"ceiling_tbps": 4.0 + len(calls) / 100}

        def measure(self, parts, g, rounds, launches):
            calls.append(("measure", g.name, rounds, launches, [p[0] for p in parts]))
            return SimpleNamespace(times_us={"champ": [3.0, 1.0, 2.0]}, discarded=1, clocks={"throttle_reasons": 0x5})

    geos = [SimpleNamespace(name="g1"), SimpleNamespace(name="g2")]
    trials = ceiling.run_check(Backend(), object(), geos, {"g1": 10, "g2": 20}, 12, 3)
    kinds = [c[0] if c[0] == "ceiling" else c[1] for c in calls]
    assert kinds == ["ceiling", "g1", "g2", "g1", "g2", "ceiling", "ceiling", "g1", "g2"]
    assert calls[0][1] == {"trials": 1} and calls[1][1:] == ("g1", 12, 10, ["champ"])
    assert [t["us"] for t in trials] == [{"g1": 2.0, "g2": 2.0}] * 3
    assert [t["first"] for t in trials] == ["ceiling", "champion", "ceiling"]
    assert trials[0]["discarded"] == {"g1": 1, "g2": 1}
    assert trials[0]["throttle"] == {"g1": "gpu_idle,sw_power_cap", "g2": "gpu_idle,sw_power_cap"}


def test_unmeasured_alternations_say_why():
    trials = [
        {"ceiling_tbps": 4.0, "us": {"a": 20.0}, "first": "ceiling"},
        {"ceiling_tbps": 4.0, "us": {"a": None}, "first": "champion", "throttle": {"a": "sw_power_cap"}},
        {"ceiling_tbps": 4.0, "us": {"a": None}, "first": "ceiling", "throttle": {"a": "hw_slowdown,sw_power_cap"}},
    ]
    s = ceiling.summarize(trials, {"a": 70_000_000})
    assert s["a"]["throttle"] == ["hw_slowdown", "sw_power_cap"]
    assert (
        "1 of 3 measured, the others' every round throttled: hw_slowdown, sw_power_cap"
        in ceiling.describe({"geometries": s})[0]
    )
    s = ceiling.summarize(trials[1:], {"a": 70_000_000})
    assert ceiling.describe({"geometries": s}) == [
        "a: no alternation measured (every round throttled: hw_slowdown, sw_power_cap)"
    ]


def test_a_run_ends_with_the_check_and_each_run_adds_one(tmp_path):
    out: list[str] = []
    cfg = load_config(_config(tmp_path, 6))
    camp = Campaign(cfg, out=out.append, command="pytest")
    summary = camp.run()
    checks = camp.ledger.meta("ceiling_checks")
    assert len(checks) == 1
    c = checks[0]
    assert c["champion"] == summary.champion.id and c["simulated"] and len(c["trials"]) == 6
    assert list(c["geometries"]) == ["in7168_out18432"]  # the weighted geometries only
    s = c["geometries"]["in7168_out18432"]
    assert s["alternations"] == 6 and 0 < s["pct_median"] < 100
    assert c["launches"] == {"in7168_out18432": camp.backend.launches_for(None, camp.cfg.geometries[0])}
    assert any(
        f"champion #{summary.champion.id} against the copy ceiling, side by side: in7168_out18432:" in m for m in out
    )
    log = render_log(camp.ledger.attempts(), camp.ledger.all_meta())
    assert "## Champion against the copy ceiling" in log and f"champion #{summary.champion.id} on the recorded" in log

    camp2 = Campaign(load_config(_config(tmp_path, 9)), out=lambda m: None, command="pytest")
    camp2.run()
    assert len(camp2.ledger.meta("ceiling_checks")) == 2


def test_off_and_out_of_range(tmp_path):
    camp = Campaign(load_config(_config(tmp_path, 3, ", ceiling_check: 0")), out=lambda m: None, command="pytest")
    camp.run()
    assert camp.ledger.meta("ceiling_checks") is None
    assert "copy ceiling, side by side" not in render_log(camp.ledger.attempts(), camp.ledger.all_meta())
    with pytest.raises(ConfigError, match="gates.perf.ceiling_check"):
        load_config(_config(tmp_path, 3, ", ceiling_check: -1"))


class CheckFails:
    """The recorded backend, except that the check's ceiling trials raise ``exc`` (the campaign's own ceiling at
    its start, asked without arguments, works)."""

    def __init__(self, cfg, exc: BaseException):
        c = cfg.gates.correctness
        self.rec, self.exc = RecordedBackend(cfg.family, cfg.geometries, seeds=c.seeds, runs=c.runs), exc
        self.name, self.simulated = self.rec.name, True

    def __getattr__(self, k):
        return getattr(self.rec, k)

    def copy_ceiling(self, **kw):
        if kw:
            raise self.exc
        return self.rec.copy_ceiling()


def test_a_failing_check_is_recorded_and_loses_nothing(tmp_path):
    cfg = load_config(_config(tmp_path, 4))
    out: list[str] = []
    backend = CheckFails(cfg, RuntimeError("cudaErrorIllegalAddress: an illegal memory access\nmore"))
    camp = Campaign(cfg, out=out.append, command="pytest", backend=backend)
    summary = camp.run()
    assert summary.attempts == 4 and len(camp.ledger.attempts()) == 4
    (c,) = camp.ledger.meta("ceiling_checks")
    assert c["error"] == "RuntimeError: cudaErrorIllegalAddress: an illegal memory access"
    assert any(
        m.startswith(
            f"champion #{summary.champion.id} against the copy ceiling, side by side: not measured: RuntimeError"
        )
        for m in out
    )


def test_ctrl_c_during_the_check_is_recorded(tmp_path):
    cfg = load_config(_config(tmp_path, 3))
    camp = Campaign(cfg, out=lambda m: None, command="pytest", backend=CheckFails(cfg, KeyboardInterrupt()))
    assert camp.run().attempts == 3
    assert camp.ledger.meta("ceiling_checks")[0]["error"] == "interrupted by the user"
