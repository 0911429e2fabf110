"""The end-to-end hook inside a campaign: observed gains held against the bound, token hashes frozen."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# A stand-in decoder: tokens/s grows with the knobs a step changes; barrier=early changes the token stream.
FAKE = r"""
import json, sys
g = json.load(open(sys.argv[sys.argv.index("--genome-file") + 1]))["mhc_pre_big_fuse"]
tps = 1000.0 * (1.004 if g["meta"] == "slice" else 1.0) * (1.5 if g["block"] == 128 else 1.0)
print("tokens/s:", tps)
print("sha256:", ("b" if g["barrier"] == "early" else "a") * 64)
"""


def test_campaign_judges_steps_end_to_end(tmp_path):
    from evo.config import load_config
    from evo.loop.campaign import Campaign
    from evo.report.logmd import render_log

    (tmp_path / "fake.py").write_text(FAKE)
    (tmp_path / "prof.yaml").write_text("decode_noise_floor: 0.003\nkernels: {mhc_pre_big_fuse: 3, rest: 97}\n")
    text = (ROOT / "configs/mhc_pre_big_fuse.yaml").read_text().replace("backend: auto", "backend: recorded")
    text = text.replace("budget: {attempts: 150, minutes: 8}", "budget: {attempts: 40}")
    # the proposer's trajectory pinned (not the shipped default, which selections move): it reaches every e2e verdict
    assert "  options: {}" in text, "the shipped config no longer gives its proposer no options"
    text = text.replace("  options: {}", "  options: {ordinal: 1.0}")
    text += (
        f"\nstorage: sqlite:///{tmp_path}/ledger.db\nbound: {{profile: prof.yaml, geometry: T4096_H4096}}\n"
        f"e2e: {{command: [{sys.executable}, {tmp_path / 'fake.py'}], runs: 2, timeout_s: 60}}\n"
    )
    (tmp_path / "c.yaml").write_text(text)
    cfg = load_config(tmp_path / "c.yaml")
    camp = Campaign(cfg, out=lambda s: None)
    camp.run()
    atts = camp.ledger.attempts()
    assert camp.ledger.meta("e2e_frozen")["hash"] == "a" * 64
    judged = [a for a in atts if a.bound and a.bound.get("e2e")]
    assert judged, "some step should have been observed end to end"
    by_id = {a.id: a for a in atts}
    for a in judged:
        v = a.bound["e2e"]
        parent = by_id.get(a.parent_id)
        if a.genome["barrier"] == "early":
            assert a.verdict.status == "rejected" and a.verdict.gate == "e2e" and v == "rejected"
        elif a.genome["block"] == 128 and parent is not None and parent.genome["block"] != 128 and v != "rejected":
            # +50% decode from a kernel that holds 3% of it: far above the bound, a measurement error.
            assert v == "measurement_error" and a.bound["claim"] is False and a.verdict.status == "accepted"
    assert {"ok", "rejected", "measurement_error"} <= {a.bound["e2e"] for a in judged}
    assert "Observed" in render_log(atts, camp.ledger.all_meta())
