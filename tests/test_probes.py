"""tools/probes: the kept probes run where the tests run (the genome probe on the recorded backend)."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from evo.config import load_config
from evo.core.genome import Genome
from harness.recorded import RecordedBackend
from tools.probes import genome as probe

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "mhc_pre_big_fuse.yaml"


def test_genome_probe_judges_and_times_genomes_against_the_reference(tmp_path, capsys):
    spec = {
        "ref": {},
        "genomes": [{"meta": "slice"}, {"h_split": 8, "vec": 16, "unroll": 4, "block": 512}, {"vec": 8, "h_split": 1}],
    }
    (tmp_path / "g.json").write_text(json.dumps(spec))
    assert probe.main([str(CONFIG), str(tmp_path / "g.json"), "--backend", "recorded", "--rounds", "6"]) == 0
    out = capsys.readouterr().out
    cfg = load_config(CONFIG)
    be = RecordedBackend(cfg.family, cfg.geometries)
    slice_g = cfg.family.baseline().replace(meta="slice")
    assert '{"meta": "slice"}: regs/spills' in out and "correctness ok" in out
    rows = re.findall(r"^  (\S+)\s+ref\s+([\d.]+) us\s+genome\s+([\d.]+) us\s+ref/genome ([\d.]+)x", out, re.M)
    assert len(rows) == 3 * len(cfg.geometries)  # one row per genome and geometry, none invalid here
    # the first genome's figures are the sweep's own medians, paired with the baseline round by round
    for (name, _ref_us, g_us, _), geo in zip(rows[:3], cfg.geometries):
        rec = be.sweep.data["genomes"][Genome(slice_g).key]
        bt = sorted(be.sweep.data["genomes"][be.baseline_key]["t"][be.sweep.geo_map[geo.name]])
        bmed = bt[len(bt) // 2]
        t = [ti * bmed / bi for ti, bi in zip(rec["t"][geo.name], rec["b"][geo.name])][:6]
        assert name == geo.name and abs(float(g_us) - statistics.median(t)) < 0.01


def test_genome_probe_says_why_a_genome_is_invalid(tmp_path, capsys):
    (tmp_path / "g.json").write_text(json.dumps({"ref": {}, "genomes": [{"block": 100}, {"nope": 1}]}))
    assert probe.main([str(CONFIG), str(tmp_path / "g.json"), "--backend", "recorded", "--rounds", "4"]) == 0
    out = capsys.readouterr().out
    assert '{"block": 100}: invalid: knob block=100 out of range' in out
    assert "{\"nope\": 1}: invalid: unknown knob 'nope'" in out
    assert "ref/genome" not in out  # nothing was timed
