"""What the recorded H200 sweeps say about every family's correctness (CPU; the data came from the GPU).

Each sweep (tools/sweep.py) ran every genome it reached through the correctness checks of the
campaign's GPU backend: 3 seeds x 2 runs per geometry, poisoned outputs, guard bands. Here, on
those records: no genome wrote NaN, left output unwritten, wrote past its buffers or raced, and
every genome whose knobs the family calls bit-preserving at a geometry reproduced the baseline's
hashes there. A family whose exactness claims are wrong fails here, without a GPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evo.config import load_config
from evo.core.family import Geometry
from evo.core.genome import Genome
from harness.recorded import load_sweeps

FAMILIES = ("mhc_pre_big_fuse", "mhc_prenorm_gemm", "moe_q2_matvec", "fp4_matvec", "mhc_pre_decode")
# measured genomes (identical SASS aside) each sweep holds at least: mhc_pre_decode's is a sweep of a sub-space
# (tools/sweep.py --knobs: 384 genomes, 288 distinct machine codes)
MIN_MEASURED = {"mhc_pre_decode": 280}


@pytest.fixture(scope="module", params=FAMILIES)
def sweep(request):
    cfg = load_config(f"configs/{request.param}.yaml")
    data = load_sweeps(cfg.family)
    assert data, f"{request.param} has no recorded sweep"
    return cfg, data[0]


def test_sweep_covers_the_config_and_checked_every_genome(sweep):
    cfg, d = sweep
    assert d["family"] == cfg.family.name
    rec = {json.dumps(g["params"], sort_keys=True) for g in d["geometries"]}
    for g in cfg.geometries:
        assert json.dumps(dict(g.params), sort_keys=True) in rec, f"{g.name} not in the sweep"
    measured = [e for e in d["genomes"].values() if "checks" in e]
    assert len(measured) >= MIN_MEASURED.get(cfg.family.name, 500) and d["baseline_key"] in d["genomes"]
    n_geo, seeds = len(d["geometries"]), d["seeds"]
    for e in measured:
        assert len({(c[0], c[1]) for c in e["checks"]}) == n_geo * seeds
        assert all(len(c[3]) == d["runs"] for c in e["checks"])


def test_no_genome_is_broken_and_exact_knobs_keep_the_bits(sweep):
    cfg, d = sweep
    fam = cfg.family
    geos = {g["name"]: Geometry(g["name"], g["params"]) for g in d["geometries"]}
    problems, exact_checked = [], 0
    for key, e in d["genomes"].items():
        if "checks" not in e:
            assert "same_as" in e, (key, e.get("status"))  # identical SASS: judged through its twin
            continue
        g = Genome(json.loads(key))
        for geo, seed, out, hashes, nonfinite, unwritten, *rest in e["checks"]:
            oob = rest[4] if len(rest) > 4 else 0
            if nonfinite or unwritten or oob or len(set(hashes)) > 1:
                problems.append(
                    f"{key} {geo}/{seed}/{out}: NaN {nonfinite}, unwritten {unwritten}, oob {oob}, "
                    f"hashes {len(set(hashes))}"
                )
            if not fam.inexact_knobs(g, geos[geo]):
                exact_checked += 1
                if any(h != "=" for h in hashes):
                    problems.append(f"{key} {geo}/{seed}/{out}: bit-preserving knobs but the bits moved")
    assert not problems, "\n".join(problems[:20])
    assert exact_checked > 0


def test_the_baseline_is_right_against_float64(sweep):
    cfg, d = sweep
    for k, err in d["baseline_errors"].items():
        out = k.rsplit("/", 1)[-1]
        assert err < cfg.family.error_bound(out), (k, err)


def test_a_merged_sweep_is_whole_or_says_so(sweep):
    """A sweep joined from shards (tools/merge_sweeps.py): its missing genomes are listed and its 'stopped' says
    whether any are, identical SASS points at a measured genome, and no shard's GPU ran far from the reference's."""
    cfg, d = sweep
    m = d.get("merged")
    if m is None:
        pytest.skip("not a merge of shards")
    missing = [k for k in d["space"]["order"] if k not in d["genomes"]]
    assert missing == m["missing"]
    assert (d["stopped"] == "complete") == (not missing)
    for e in d["genomes"].values():
        if "same_as" in e:
            assert "status" in d["genomes"][e["same_as"]]
    for s in m["shards"]:
        assert all(0.9 < v < 1.1 for v in s["scale"].values()), (s["file"], s["scale"])


def test_a_geometry_recorded_under_its_name_with_other_parameters_is_told_apart():
    """A config geometry named like a recorded one but of another shape: the message gives both with parameters
    (it used to name the same geometry as missing and as recorded)."""
    import pytest

    from evo.core.family import Geometry, load_family
    from harness.recorded import NotRecorded, find_sweep

    fam = load_family("mhc_pre_big_fuse")
    with pytest.raises(NotRecorded) as e:
        find_sweep(fam, [Geometry("T4096_H4096", {"T": 4096, "H": 2048, "S": 1, "prenorm": False})])
    msg = str(e.value)
    assert "covers geometries T4096_H4096 (H=2048, S=1, T=4096, prenorm=False)" in msg
    assert "T4096_H4096 (H=4096, S=1, T=4096, prenorm=False)" in msg.split("recorded: ")[1]


def test_a_parameter_the_sweep_predates_matches_at_its_default_only():
    """fused_add_rmsnorm's ``rounds`` came after its H200 sweep: at its default (1, what the sweep's kernel did) a
    geometry is the sweep's; at 2 (another kernel path) it was never measured."""
    import pytest

    from evo.core.family import Geometry, load_family
    from harness.recorded import NotRecorded, find_sweep

    fam = load_family(str(Path(__file__).resolve().parent.parent / "examples" / "fused_add_rmsnorm"))
    assert "rounds" not in find_sweep(fam, [Geometry("x", {"T": 1, "H": 4096})]).data["geometries"][0]["params"]
    assert find_sweep(fam, [Geometry("T1", {"T": 1, "H": 4096, "rounds": 1})]).geo_map == {"T1": "T1_H4096"}
    with pytest.raises(NotRecorded):
        find_sweep(fam, [Geometry("T1", {"T": 1, "H": 4096, "rounds": 2})])
