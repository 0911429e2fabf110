"""evo selfcheck on the CPU: the A/A check accepts nothing; static faults get their verdict, the rest say why not."""

from __future__ import annotations

from pathlib import Path

from evo.config import load_config
from evo.core.family import load_family
from evo.loop.campaign import Campaign
from evo.loop.selfcheck import selfcheck
from evo.report.logmd import render_log

ROOT = Path(__file__).resolve().parent.parent


def test_selfcheck_on_recorded_data(tmp_path):
    text = (ROOT / "configs/mhc_pre_big_fuse.yaml").read_text().replace("backend: auto", "backend: recorded")
    (tmp_path / "c.yaml").write_text(text + f"\nstorage: sqlite:///{tmp_path}/ledger.db\n")
    camp = Campaign(load_config(tmp_path / "c.yaml"), out=lambda s: None)
    out = selfcheck(camp, aa_evaluations=5)
    assert out["aa"]["accepted"] == 0 and out["aa"]["evaluations"] == 5
    fam = load_family("mhc_pre_big_fuse")
    assert set(out["faults"]) == set(fam.faults)
    judged = {t: v for t, v in out["faults"].items() if v["ok"] is not None}
    assert {v["verdict"] for v in judged.values()} >= {"error: compile", "rejected: static"}
    assert all(v["ok"] for v in judged.values()), judged
    for v in out["faults"].values():
        if v["ok"] is None:  # needs a GPU: said so, never passed off as a verdict
            assert v["verdict"] == "error: not_recorded" and "need a GPU" in v["reason"]
    log = render_log(camp.ledger.attempts(), camp.ledger.all_meta())
    assert "## Self-check" in log and "(right verdict)" in log and "(needs a GPU)" in log
