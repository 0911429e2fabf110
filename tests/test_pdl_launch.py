"""gates.perf.launch: pdl — the config key, the builds' EVO_PDL, which launches take PDL, and what a campaign
refuses; on a GPU, fp4_matvec's tma kernel launched with PDL gives a plain launch's bits in a chain whose x changes
between launches."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evo.config import ConfigError, load_config
from harness.build import Builder, resolve_source

ROOT = Path(__file__).resolve().parent.parent
PDL_CFG = ROOT / "configs" / "fp4_matvec_pdl.yaml"
TMA = {"expand": "mma", "qload": "tma", "row_groups": 1, "rows_per_block": 16, "unroll": 1, "warps": 8}


def _variant(tmp_path: Path, perf_tail: str, backend: str = "gpu") -> Path:
    text, n = re.subn(r",\s*launch: pdl\}", perf_tail + "}", PDL_CFG.read_text())
    assert n == 1, "the shipped PDL config no longer ends its perf gates with launch: pdl"
    text = re.sub(r"^backend: .*$", f"backend: {backend}", text, flags=re.M)
    text += f"storage: sqlite:///{tmp_path / 'c.db'}\n"
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


def test_shipped_pdl_config_and_its_defines():
    cfg = load_config(PDL_CFG)
    assert cfg.gates.perf.launch == "pdl" and cfg.build_defines == {"EVO_PDL": 1}
    plain = load_config(ROOT / "configs" / "fp4_matvec.yaml")
    assert plain.gates.perf.launch == "plain" and plain.build_defines == {}
    # the same family, geometries and gates otherwise
    assert [g.name for g in cfg.geometries] == [g.name for g in plain.geometries]
    assert cfg.gates.correctness == plain.gates.correctness


def test_launch_value_out_of_range_is_a_one_line_error(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_config(_variant(tmp_path, ", launch: cooperative"))
    msg = str(e.value)
    assert "gates.perf.launch" in msg and "pdl" in msg and "\n" not in msg


def test_builder_adds_the_campaign_defines_to_every_module():
    cfg = load_config(PDL_CFG)
    fam = cfg.family
    g = fam.baseline().replace(**TMA)
    spec = fam.specialization(cfg.geometries[0])
    src = resolve_source(fam, g, spec, "// body", {"EVO_PDL": 1})
    head = src.split('#line 1 "kernel.cu"')[0]
    assert "#define EVO_PDL 1" in head and "#define EVO_PDL" not in resolve_source(fam, g, spec, "// body")
    b = Builder(fam, cfg.geometries, "sm_90", defines=cfg.build_defines)
    assert b.defines == {"EVO_PDL": 1}


def test_only_tma_kernels_are_pdl_safe():
    cfg = load_config(PDL_CFG)
    fam = cfg.family
    assert fam.pdl_safe(fam.baseline().replace(**TMA))
    assert not fam.pdl_safe(fam.baseline()) and not fam.pdl_safe(fam.baseline().replace(qload="cp_async"))
    # the other families' kernels have no griddepcontrol.wait: never PDL-launched
    for name in ("mhc_prenorm_gemm", "moe_q2_matvec", "mhc_pre_big_fuse"):
        f = load_config(ROOT / "configs" / f"{name}.yaml").family
        assert not f.pdl_safe(f.baseline())


def test_pdl_kernel_waits_before_x_and_y_only_under_evo_pdl():
    # the source's PDL instructions sit behind EVO_PDL (a plain campaign's machine code is unchanged: session 16)
    src = (ROOT / "candidates" / "fp4_matvec" / "kernel.cu").read_text()
    assert src.count("griddepcontrol.wait") == 1 and src.count("griddepcontrol.launch_dependents") == 1
    body = src[src.index("pdl_wait() {") :]
    assert body.index("#if EVO_PDL") < body.index("griddepcontrol.wait")
    kernel = src[src.index("fp4_matvec(const u8* __restrict__ w,   // [out, ROW_STRIDE]") :]
    assert kernel.index("pdl_wait();") < kernel.index("load_x4(x,")


def test_a_pdl_campaign_without_a_gpu_says_why(tmp_path, monkeypatch):
    from evo.loop.errors import CampaignError
    from evo.loop.seams import make_backend

    monkeypatch.setattr("harness.gpu.gpu_available", lambda: False)
    cfg = load_config(_variant(tmp_path, ", launch: pdl", backend="recorded"))
    with pytest.raises(CampaignError, match="no recorded sweep of family fp4_matvec timed pdl launches"):
        make_backend(cfg, Builder(cfg.family, cfg.geometries, "sm_90", defines=cfg.build_defines))


def test_a_sweep_timed_with_pdl_serves_pdl_campaigns_and_only_them(tmp_path, monkeypatch):
    """tools/sweep.py on a launch: pdl config writes launch: pdl; the recorded backend replays a campaign only from a
    sweep timed with its own launches (older sweeps say nothing: plain)."""
    import shutil

    from evo.loop.campaign import Campaign
    from harness import sweepfile
    from harness.recorded import find_sweep, sweep_launch

    monkeypatch.setattr("harness.gpu.gpu_available", lambda: False)
    fam_dir = tmp_path / "mhc_pre_big_fuse"
    shutil.copytree(ROOT / "candidates" / "mhc_pre_big_fuse", fam_dir, ignore=shutil.ignore_patterns("__pycache__"))
    (plain,) = sweepfile.sweep_files(fam_dir / "recorded")
    d = sweepfile.load(plain)
    assert sweep_launch(d) == "plain"
    d["launch"] = "pdl"
    sweepfile.save(fam_dir / "recorded" / "h200-pdl-sweep.json.xz", d)
    text = (ROOT / "configs" / "mhc_pre_big_fuse.yaml").read_text()
    text = re.sub(r"^family: .*$", f"family: {fam_dir}", text, flags=re.M)
    text = re.sub(r"^backend: .*$", "backend: recorded", text, flags=re.M)
    text = re.sub(r"^budget: .*$", "budget: {attempts: 3}", text, flags=re.M)
    for launch in ("pdl", "plain"):
        p = tmp_path / f"{launch}.yaml"
        body = re.sub(r"(rule: \w+)", rf"\1, launch: {launch}", text)  # (inside gates.perf's flow mapping)
        p.write_text(body + f"storage: sqlite:///{tmp_path / launch}.db\n")
        cfg = load_config(p)
        assert cfg.gates.perf.launch == launch
        sweep = find_sweep(cfg.family, cfg.geometries, launch)
        assert sweep_launch(sweep.data) == launch and sweep.path.name.startswith(
            "h200-pdl" if launch == "pdl" else "h200-sweep"
        )
        camp = Campaign(cfg, out=lambda s: None)
        assert camp.backend.name == "recorded" and camp.backend.pdl == (launch == "pdl")
        camp.run()
        assert len(camp.ledger.attempts()) == 3


@pytest.mark.gpu
def test_fp4_tma_with_pdl_matches_plain_launches_in_a_chain():
    # x changes between launches (a torch copy before each): a PDL launch that read x before its wait would see
    # the x before; the outputs must equal a plain launch's on each x, bit for bit
    import torch

    from harness.gpu import GpuBackend

    cfg = load_config(PDL_CFG)
    fam = cfg.family
    geo = next(g for g in cfg.geometries if g.name == "in4096_out4096")
    b = Builder(fam, [geo], defines=cfg.build_defines)
    be = GpuBackend(fam, [geo], b, seeds=1, runs=1, pdl=True)
    g = fam.baseline().replace(**TMA)
    built = b.build(g)
    pdl, plain = be.load(built, g), be.load(built, g)
    plain.pdl = False
    with torch.cuda.stream(be.stream):
        inp = dict(be.inputs(geo, 0))
        xs = [torch.randn_like(inp["x"]) for _ in range(2)]
        inp["x"] = xs[0].clone()
        y = torch.empty(geo["out"], dtype=torch.float32, device=be.device)
        want = []
        for x in xs:
            inp["x"].copy_(x)
            be._launcher(plain, geo, inp, {"y": y})()
            want.append(y.clone())
        launch = be._launcher(pdl, geo, inp, {"y": y})
        launch()
        got = [torch.empty_like(y) for _ in range(8)]
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=be.stream):
            for i in range(8):
                inp["x"].copy_(xs[i % 2])
                launch()
                got[i].copy_(y)
        graph.replay()
    torch.cuda.synchronize()
    assert not torch.equal(want[0], want[1])
    assert all(torch.equal(got[i], want[i % 2]) for i in range(8))


def test_attempt_log_says_how_launches_were_made():
    from test_logmd import _campaign

    from evo.report.logmd import render_log

    atts, meta = _campaign()
    assert "- Launches:" not in render_log(atts, meta)  # plain launches: nothing added
    meta["config"]["gates"]["perf"]["launch"] = "pdl"
    text = render_log(atts, meta)
    line = next(ln for ln in text.splitlines() if ln.startswith("- Launches:"))
    assert "pdl" in line and "PDL-safe" in line and "the others plainly" in line


def test_every_timing_names_each_parts_launch():
    # the method string beside a timing: which part took PDL (the family's pdl_safe), which did not
    from types import SimpleNamespace

    from evo.loop.report_lines import launches_note

    cfg = load_config(PDL_CFG)
    fam = cfg.family
    parts = [
        ("cand", SimpleNamespace(genome=fam.baseline().replace(**TMA))),
        ("base", SimpleNamespace(genome=fam.baseline())),
    ]
    assert launches_note(cfg.gates.perf.launch, fam, parts) == "; launches: cand PDL, base plain"
    plain = load_config(ROOT / "configs" / "fp4_matvec.yaml")
    assert launches_note(plain.gates.perf.launch, fam, parts) == ""


def test_the_gpu_backend_of_a_config_takes_its_launches(monkeypatch):
    # campaign, worker and export all build their GPU backend through GpuBackend.for_config
    from harness.gpu import GpuBackend

    got: dict = {}
    monkeypatch.setattr(GpuBackend, "__init__", lambda self, *a, **kw: got.update(args=a, kw=kw))
    for path, pdl in ((PDL_CFG, True), (ROOT / "configs" / "fp4_matvec.yaml", False)):
        cfg = load_config(path)
        GpuBackend.for_config(cfg, Builder(cfg.family, cfg.geometries, "sm_90", defines=cfg.build_defines))
        c = cfg.gates.correctness
        assert got["kw"]["pdl"] is pdl and got["kw"]["batch_ms"] == cfg.gates.perf.batch_ms
        assert (got["kw"]["seeds"], got["kw"]["runs"]) == (c.seeds, c.runs)
        assert [g.name for g in got["args"][1]] == [g.name for g in cfg.geometries]
