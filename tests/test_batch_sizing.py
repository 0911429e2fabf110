"""A campaign sizes each part's CUDA graph for that part (about gates.perf.batch_ms of it), not every part by the
baseline's launch count: short graphs of a fast candidate read slower than long ones
(benchmarks/results/2026-12-01-batch-sizing-probe)."""

from __future__ import annotations

import re
import zlib
from pathlib import Path

from evo.config import load_config
from evo.core.genome import Genome
from evo.loop.campaign import Campaign
from harness.gpu import Samples
from harness.recorded import RecordedBackend

ROOT = Path(__file__).resolve().parent.parent


class SizingBackend(RecordedBackend):
    """The recorded H200 sweep, with a launch count of each genome's own and every measure call noted."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.sized: list[tuple[str, str]] = []
        self.measured: list[tuple[list[str], list[str], object]] = []

    @staticmethod
    def count(key: str, geometry: str) -> int:
        return 10 + zlib.crc32(f"{key}/{geometry}".encode()) % 500

    def launches_for(self, loaded, g):
        self.sized.append((loaded.functions["key"], g.name))
        return self.count(loaded.functions["key"], g.name)

    def measure(self, parts, g, rounds, launches=None, stop=None):
        self.measured.append(([p[0] for p in parts], [p[1].functions["key"] for p in parts], launches))
        n = len(self.sized)
        s = super().measure(parts, g, rounds, launches, stop)
        del self.sized[n:]  # (the recorded samples' own count of the sweep's launches)
        return Samples(s.times_us, s.discarded, launches, s.clocks, s.stopped_early)


def test_each_part_gets_a_graph_of_its_own_size(tmp_path):
    text = (ROOT / "configs" / "fp4_matvec.yaml").read_text()
    text = re.sub(r"^budget: .*$", "budget: {attempts: 14}", text, flags=re.M)
    text = re.sub(r"^backend: .*$", "backend: recorded", text, flags=re.M)
    p = tmp_path / "c.yaml"
    p.write_text(text + f"storage: sqlite:///{tmp_path / 'c.db'}\n")
    cfg = load_config(p)
    backend = SizingBackend(cfg.family, cfg.geometries)
    camp = Campaign(cfg, out=lambda m: None, command="pytest", backend=backend)
    summary = camp.run()
    base_key = Genome(camp.family.baseline()).key
    measured = [(keys, n) for labels, keys, n in backend.measured if labels[0] == "cand"]
    assert measured, "no attempt reached the performance gate"
    for keys, n in measured:
        # n: label -> count, each the count launches_for gave that part's own genome
        assert isinstance(n, dict) and len(n) == len(keys) and set(n) <= {"cand", "champ", "base"}
        for key, label in zip(keys, ["cand", "champ", "base"]):
            assert n[label] in {backend.count(key, g.name) for g in cfg.geometries}
    # A/A: the baseline's own count for both copies
    aa = [n for labels, keys, n in backend.measured if labels == ["A", "B"]]
    assert aa and all(n in {backend.count(base_key, g.name) for g in cfg.geometries} for n in aa)
    # the ceiling check's: the champion's own
    champ = [(keys, n) for labels, keys, n in backend.measured if labels == ["champ"]]
    assert champ and all(n in {backend.count(keys[0], g.name) for g in cfg.geometries} for keys, n in champ)
    # each genome is sized once a geometry, however often it is timed
    assert len(backend.sized) == len(set(backend.sized))
    timed = [a for a in camp.ledger.attempts() if a.timings]
    assert any("graphs of cand x " in t.method for a in timed for t in a.timings.values())
    assert summary.attempts == 14


def test_recorded_samples_carry_the_counts_the_sweep_timed_with():
    # older sweeps timed every genome with the baseline's count; a sweep from tools/sweep.py now keeps each
    # genome's own ("n"), and the recorded samples say which
    cfg = load_config(ROOT / "configs" / "fp4_matvec.yaml")
    be = RecordedBackend(cfg.family, cfg.geometries)
    g = cfg.geometries[0]
    rg = be.sweep.geo_map[g.name]
    base = be.load(None, cfg.family.baseline())
    key = next(k for k, e in be.sweep.data["genomes"].items() if "t" in e and rg in e["t"] and k != be.baseline_key)
    other = be.load(None, dict(Genome.from_key(key)))
    old = be.measure([("cand", other), ("base", base)], g, 4, {"cand": 999, "base": 999})
    assert old.launches == {"cand": be.launches_for(base, g), "base": be.launches_for(base, g)}
    be.sweep.data["genomes"][key]["n"] = {rg: 412}
    try:
        new = be.measure([("cand", other), ("base", base)], g, 4)
    finally:  # (the sweep's data may be shared with other tests)
        del be.sweep.data["genomes"][key]["n"]
    assert new.launches == {"cand": 412, "base": be.launches_for(base, g)}
    assert new.batch_text() == f"graphs of cand x 412, base x {be.launches_for(base, g)} launches"
    assert new.times_us == old.times_us
