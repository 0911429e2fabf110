"""The share-derived decode bound, decode profiles, and evo replay (recorded backend)."""

from __future__ import annotations

import gzip
import math
import shutil
from pathlib import Path

import pytest

from evo.measure.profile import ProfileError, load_profile
from gates.bound import bound_gate, share_after, step_bound

ROOT = Path(__file__).resolve().parent.parent


def test_bound_matches_the_reference_campaign():
    # ds4 campaign: "stage once per block" 1.976x on a kernel at 35.0% of decode -> step bound +20.9%.
    assert step_bound(0.35, 1.976) == pytest.approx(1.209, abs=0.001)
    # Shares move: after 1.976x the kernel holds 21.4% of the remaining time.
    assert share_after(0.35, 1.976) == pytest.approx(0.17712 / (0.65 + 0.17712), rel=1e-3)


def test_bound_gate_claims_only_above_the_decode_floor():
    big = bound_gate(0.35, 1.0, 1.976, 0.007)
    assert big.claim and big.bound == pytest.approx(1.209, abs=0.001) and "step bound" in big.summary
    small = bound_gate(0.05, 1.0, 1.02, 0.007)
    assert not small.claim and "no end-to-end claim" in small.summary
    chain = bound_gate(0.35, 1.976, 2.089 / 1.976, 0.007)
    assert chain.cumulative_kernel == pytest.approx(2.089)
    assert chain.predicted_decode == pytest.approx(1 / (1 - 0.35 + 0.35 / 2.089))
    # Step bounds compose to the cumulative prediction.
    assert big.bound * chain.bound == pytest.approx(chain.predicted_decode, rel=1e-9)


def test_profiles_yaml_and_csv(tmp_path):
    y = tmp_path / "p.yaml"
    y.write_text("decode_noise_floor: 0.007\nkernels: {mhc_pre_big_fuse: 3, other: 97}\n")
    p = load_profile(y)
    assert p.share("mhc_pre_big_fuse") == pytest.approx(0.03) and p.decode_noise_floor == 0.007
    with pytest.raises(ProfileError):
        p.share("nope")
    c = tmp_path / "k.csv"
    c.write_text(
        '"Time (%)","Total Time (ns)","Instances","Name"\n'
        '35.0,"1,891,400",16182,"mix_matvec_rocmfp2_moe_kernel"\n65.0,3508200,1,"other_kernel"\n'
    )
    q = load_profile(c)
    assert q.share("rocmfp2_moe") == pytest.approx(1891400 / (1891400 + 3508200))
    bad = tmp_path / "b.yaml"
    bad.write_text("kernels: {a: -1}\n")
    with pytest.raises(ProfileError, match="kernels.a"):
        load_profile(bad)


def _cfg(tmp_path: Path, attempts: int, extra: str = "") -> Path:
    text = (ROOT / "configs/mhc_pre_big_fuse.yaml").read_text().replace("backend: auto", "backend: recorded")
    text = text.replace("budget: {attempts: 150, minutes: 8}", f"budget: {{attempts: {attempts}}}")
    text += f"\nstorage: sqlite:///{tmp_path}/ledger.db\n" + extra
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text)
    return cfg


def test_campaign_records_bound_for_accepted_steps(tmp_path):
    from evo.config import load_config
    from evo.loop.campaign import Campaign
    from evo.report.logmd import render_log

    (tmp_path / "prof.yaml").write_text("decode_noise_floor: 0.007\nkernels: {mhc_pre_big_fuse: 3, rest: 97}\n")
    cfg = load_config(_cfg(tmp_path, 30, "bound: {profile: prof.yaml, geometry: T4096_H4096}\n"))
    camp = Campaign(cfg, out=lambda s: None)
    camp.run()
    acc = [a for a in camp.ledger.attempts() if a.verdict.status == "accepted"]
    assert acc and all(a.bound is not None for a in acc)
    cum = 1.0
    for a in acc:
        k = a.speedup_vs_parent["T4096_H4096"].value
        assert a.bound["kernel_speedup"] == pytest.approx(k)
        assert a.bound["share"] == pytest.approx(share_after(0.03, cum), rel=0.02)
        cum = a.speedup_vs_baseline["T4096_H4096"].value
    log = render_log(camp.ledger.attempts(), camp.ledger.all_meta())
    assert "## Decode bound" in log and "Step bound" in log


def test_replay_links_original_and_reports_changes(tmp_path):
    from evo.config import load_config
    from evo.loop.campaign import Campaign
    from evo.loop.replay import replay

    cfg = load_config(_cfg(tmp_path, 20))
    Campaign(cfg, out=lambda s: None).run()
    camp = Campaign(cfg, out=lambda s: None, replaying=True)
    before = camp.ledger.attempts()
    rejected = [a for a in before if a.verdict.status == "rejected" and a.verdict.gate == "perf"]
    assert rejected
    pairs = replay(camp, gate="perf")
    assert [o.id for o, _ in pairs] == [a.id for a in rejected]
    for old, new in pairs:
        assert new.derived_from == [old.id] and new.origin.startswith(f"replay of #{old.id}")
        assert new.genome_key == old.genome_key
        assert new.verdict.gate == "perf" and new.timings, "a replay is measured again, not skipped as seen SASS"
        assert not math.isnan(new.score or 0.0)


def test_replay_of_the_committed_h200_campaign_on_the_recorded_backend(tmp_path):
    """The GPU ledger re-judged here: knob genomes replay, source-level faults say they need a GPU."""
    from evo.config import load_config
    from evo.loop.campaign import Campaign
    from evo.loop.replay import replay

    db = tmp_path / "h200.db"
    with (
        gzip.open(ROOT / "benchmarks/results/2026-11-30-mhc-pre-big-fuse-campaign/ledger.db.gz") as src,
        open(db, "wb") as dst,
    ):
        shutil.copyfileobj(src, dst)  # committed ledgers are gzipped (benchmarks/results/README.md)
    cfg = load_config(
        ROOT / "configs/mhc_pre_big_fuse.yaml", backend_override="recorded", storage_override=f"sqlite:///{db}"
    )
    camp = Campaign(cfg, out=lambda s: None, replaying=True)
    pairs = replay(camp, ids=[2, 3, 211])
    got = {o.id: (o.backend, n.backend, n.verdict.label()) for o, n in pairs}
    assert got[2] == ("gpu", "recorded", "rejected: correctness")
    assert got[3][:2] == ("gpu", "recorded") and got[3][2].startswith("rejected")
    assert got[211] == ("gpu", "recorded", "error: not_recorded")
    dev = camp.ledger.meta("device")
    assert "recorded" not in dev and dev["uuid"].startswith("GPU-")  # the campaign's own device facts are kept
