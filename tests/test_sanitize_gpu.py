"""The real compute-sanitizer on the GPU, as the sanitizer gate runs it: only the family's kernel instrumented
(--kernel-name), both tools at once. A filter that matched nothing would read "clean" on every kernel, so each
case that must report a finding checks that the filtered tool still sees the family's kernel."""

from __future__ import annotations

from pathlib import Path

import pytest

from evo.config import load_config
from evo.measure import sanitize as sz
from gates.sanitizer import ToolReport, sanitizer_gate

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.gpu


def _needs_tool() -> None:
    if sz.find_sanitizer()[0] is None:
        pytest.skip("compute-sanitizer is not installed on this GPU machine")


def _run(tmp_path: Path, config: str, genome: dict, fault: str | None = None, tools=("memcheck", "racecheck")):
    cfg = load_config(ROOT / "configs" / config)
    gf = sz.write_genome_file(tmp_path / "g.json", cfg.family.name, genome, fault=fault)
    opts = sz.kernel_options(cfg.family, False)
    return cfg, sz.run_pass(Path(cfg.path), gf, tools, 300, options=opts, parallel=True)


def test_a_clean_kernel_is_clean_with_only_its_kernel_instrumented(tmp_path):
    _needs_tool()
    cfg, res = _run(
        tmp_path, "mhc_pre_big_fuse.yaml", dict(load_config(ROOT / "configs/mhc_pre_big_fuse.yaml").family.baseline())
    )
    assert {t: r.status for t, r in res.items()} == {"memcheck": "clean", "racecheck": "clean"}, res
    assert all(r.argv[3:5] == ["--kernel-name", "kns=mhc_pre_big_fuse"] for r in res.values())


def test_the_filtered_racecheck_still_sees_the_missing_barrier(tmp_path):
    _needs_tool()
    base = dict(load_config(ROOT / "configs/mhc_pre_big_fuse.yaml").family.baseline())
    _, res = _run(
        tmp_path, "mhc_pre_big_fuse.yaml", base, "missing barrier: streaming warps do not wait for pre", ("racecheck",)
    )
    r = res["racecheck"]
    assert r.status == "errors" and r.count and "Race reported" in " ".join(r.findings), r


def test_the_fp4_tma_race_is_reported_and_matches_its_declared_suppression(tmp_path):
    """The racecheck report that docs/fp4-bandwidth.md argues is racecheck not modelling __syncwarp (the
    family's suppression): filtered to fp4_matvec it is still reported, and the gate passes it as declared."""
    _needs_tool()
    g = {"expand": "mma", "qload": "tma", "row_groups": 1, "rows_per_block": 16, "unroll": 1, "warps": 8}
    cfg, res = _run(tmp_path, "fp4_matvec_pdl.yaml", g, tools=("racecheck",))
    r = res["racecheck"]
    assert r.status == "errors" and any("Race reported between Write access at fp4_matvec+" in f for f in r.findings)
    verdict = sanitizer_gate([ToolReport.from_mapping(r.to_dict())], cfg.family.sanitizer_suppressions, g)
    assert verdict.verdict.ok and verdict.record["suppressed"][0]["name"] == "tma-stage-release-after-syncwarp"
