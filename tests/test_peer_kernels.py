"""Peer kernels (peer.kernels): config refusals in one line, and a campaign's Peer section with a kernel peer.

The campaign runs on the recorded H200 sweep of examples/fused_add_rmsnorm, wrapped by a backend that also "runs"
peer kernels: each peer's outputs come from a CPU stand-in of its kernel, held against the campaign's reference by
evo's own check (evo/measure/peer_kernels.py outputs_problem), and its timings are the champion's scaled. The GPU
test at the end times the real pair (examples/fused_add_rmsnorm and its engine_peer) interleaved."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from evo.config import ConfigError, load_config
from evo.loop.campaign import Campaign
from evo.loop.peers import META_KEY
from evo.report.logmd import render_log
from gates.correctness import CorrectnessEvidence, OutputCheck
from harness.recorded import RecordedBackend

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "fused_add_rmsnorm"
PEER = EX / "engine_peer"
ENGINES = ROOT / "examples" / "engines"
GEOMS = """geometries:
  - {name: T1_H4096, T: 1, H: 4096, weight: 1}
  - {name: T32_H4096, T: 32, H: 4096, weight: 1}
"""


def _config(
    tmp_path: Path, kernels: str, backend: str = "recorded", attempts: int = 3, extra: str = "", tc: str = "off"
) -> Path:
    p = tmp_path / "peer.yaml"
    p.write_text(
        f"campaign: peers\nfamily: {EX}\n{GEOMS}budget: {{attempts: {attempts}}}\n"
        "gates:\n  correctness: {mode: tolerance}\n  perf: {rounds: 12, aa_rounds: 12, batch_ms: 2.0}\n"
        f"backend: {backend}\nclocks: record\nseed: 0\nstorage: sqlite:///{tmp_path / 'ledger.db'}\n"
        f"peer:\n  torch_compile: '{tc}'\n  kernels: {kernels}\n{extra}"
    )
    return p


def _refusal(tmp_path: Path, kernels: str) -> str:
    with pytest.raises(ConfigError) as e:
        load_config(_config(tmp_path, kernels))
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_config_reads_peer_kernels(tmp_path):
    cfg = load_config(_config(tmp_path, f"[{PEER}, {{family: {PEER}, name: wide, genome: {{block: 1024}}}}]"))
    a, b = cfg.peer.kernels
    assert (a.name, a.family.name, dict(a.genome)) == ("engine_fused_add_rmsnorm", a.family.name, {"block": "engine"})
    assert (b.name, dict(b.genome)) == ("wide", {"block": 1024})
    assert load_config(_config(tmp_path, "[]")).peer.kernels == ()
    # a campaign config names its family (and its start: genome)
    side = tmp_path / "side" / "evo.yaml"
    side.parent.mkdir()
    side.write_text(f"family: {PEER}\nstart: {{block: 512}}\n")
    (k,) = load_config(_config(tmp_path, f"[{side}]")).peer.kernels
    assert dict(k.genome) == {"block": 512}


def test_mismatched_peers_are_refused_in_one_line(tmp_path):
    # geometry parameters batch/d (minilib's): another problem
    msg = _refusal(tmp_path, f"[{ENGINES / 'headerlib' / 'evo'}]")
    assert msg.startswith("peer.kernels[0] (minilib_fused_add_rmsnorm): another problem: its geometry parameters")
    # the same T and H, but outputs named input/residual (the torch extension's): another problem
    msg = _refusal(tmp_path, f"[{ENGINES / 'torchext' / 'evo'}]")
    assert "another problem: its outputs at T1_H4096 are input bfloat16[1, 4096]" in msg
    assert "the campaign's out bfloat16[1, 4096]" in msg
    assert "unknown key" not in _refusal(tmp_path, f"[{{family: {PEER}, genome: {{block: 3}}}}]")
    assert "knob block=3 out of range" in _refusal(tmp_path, f"[{{family: {PEER}, genome: {{block: 3}}}}]")
    assert "'kernel' is not a key of a peer" in _refusal(tmp_path, f"[{{family: {PEER}, kernel: x}}]")
    assert "is taken by another peer" in _refusal(tmp_path, f"[{PEER}, {PEER}]")
    assert "cannot label a peer" in _refusal(tmp_path, f"[{{family: {PEER}, name: champion}}]")
    assert "expected a list" in _refusal(tmp_path, str(PEER))
    assert "peer.kernels[0].family: " in _refusal(tmp_path, f"[{tmp_path / 'nowhere'}]")


class _Peer:
    def __init__(self, name: str, genome: dict[str, Any]):
        self.name, self.genome = name, genome


class PeerTimingBackend:
    """The recorded backend, plus peer kernels run as CPU stand-ins (``kernels``: name -> (inputs -> outputs)) and
    timed as the champion's recorded time times ``slower`` (name -> factor), a little noise each round."""

    peer_kernels = True

    def __init__(self, inner: RecordedBackend, family: Any, kernels: dict, slower: dict):
        self.inner, self.family, self.kernels, self.slower = inner, family, kernels, slower
        self.name, self.simulated = inner.name, False

    def __getattr__(self, k: str) -> Any:
        return getattr(self.inner, k)

    def load(self, built: Any, genome: Any, peer: str | None = None) -> Any:
        assert peer in (None, "torch.compile") or built is not None  # a kernel peer is built with its family's options
        return _Peer(peer, dict(genome)) if peer is not None else self.inner.load(built, genome)

    def correctness(self, loaded: Any, *, freeze: bool = False) -> Any:
        if not isinstance(loaded, _Peer):
            return self.inner.correctness(loaded, freeze=freeze)
        import torch

        ev = CorrectnessEvidence()
        for g in self.inner.geometries:
            inputs = self.family.make_inputs(g, 0, torch.device("cpu"))
            ref = self.family.reference(inputs, g)
            for name, t in self.kernels[loaded.name](inputs, g).items():
                rel = float(torch.linalg.vector_norm(t.double() - ref[name]) / torch.linalg.vector_norm(ref[name]))
                ev.checks.append(OutputCheck(g.name, 0, name, ["h", "h"], rel_err=rel))
        return ev

    def prepare_torch_peer(self, loaded: Any, geometries: Any) -> dict:
        assert loaded.name == "torch.compile" and loaded.genome == {"mode": "default"}
        return {g.name: {"compile_s": 0.5} for g in geometries}

    def launches_for(self, loaded: Any, g: Any) -> int:
        return 10 if isinstance(loaded, _Peer) else self.inner.launches_for(loaded, g)

    def measure(self, parts, g, rounds, launches=None, stop=None):
        if not any(isinstance(x, _Peer) for _, x in parts):
            return self.inner.measure(parts, g, rounds, launches, stop)
        own = [(lb, x) for lb, x in parts if not isinstance(x, _Peer)]
        s = self.inner.measure(own, g, rounds, {lb: 10 for lb, _ in own})
        c = s.times_us["champion"]
        for lb, x in parts:
            if isinstance(x, _Peer):
                s.times_us[lb] = [t * self.slower[lb] * (1 + 0.001 * (i % 3)) for i, t in enumerate(c)]
        return s


def _engine(inputs, g):
    import torch

    r = (inputs["x"].float() + inputs["residual"].float()).to(torch.bfloat16)
    out = r.float() * torch.rsqrt(r.float().pow(2).mean(-1, keepdim=True) + 1e-6) * inputs["weight"].float()
    return {"out": out.to(torch.bfloat16), "residual_out": r}


def _broken(inputs, g):
    out = _engine(inputs, g)
    out["out"][: max(1, g["T"] // 2)] = inputs["x"][: max(1, g["T"] // 2)]  # half the rows never normalized
    return out


def test_campaign_times_kernel_peers_and_shows_them_in_the_log(tmp_path, monkeypatch):
    monkeypatch.setenv("EVO_CACHE_DIR", str(tmp_path / "cache"))
    broken = tmp_path / "broken_peer"
    shutil.copytree(PEER, broken)
    other = tmp_path / "other_eps"  # the same kernel, but its reference's eps is not the campaign's
    shutil.copytree(PEER, other)
    (other / "family.py").write_text((other / "family.py").read_text().replace("EPS = 1e-6", "EPS = 1e-2"))
    named = ((PEER, "engine"), (broken, "broken"), (other, "other"))
    kernels = "[" + ", ".join(f"{{family: {f}, name: {n}}}" for f, n in named) + "]"
    cfg = load_config(_config(tmp_path, kernels, attempts=3, tc="default"))
    inner = RecordedBackend(cfg.family, cfg.geometries, seeds=3, runs=2)
    slower = {"engine": 1.5, "torch.compile": 2.0}
    backend = PeerTimingBackend(inner, cfg.family, {"engine": _engine, "broken": _broken}, slower)
    lines: list[str] = []
    camp = Campaign(cfg, backend=backend, out=lines.append, command="pytest")
    camp.run()

    (rec,) = camp.ledger.meta(META_KEY)
    champ = camp.champion
    assert rec["champion"] == champ.id
    assert rec["peers"]["engine"]["correct"] is True and "error" not in rec["peers"]["engine"]
    assert rec["peers"]["broken"]["error"].startswith("fails correctness: out at T1_H4096 seed 0 has relative error")
    assert rec["peers"]["other"]["error"].startswith("not the campaign's problem: its reference's out differs")
    for g in ("T1_H4096", "T32_H4096"):
        row = rec["geometries"][g]
        assert set(row["peers"]) == {"engine", "torch.compile"}  # the wrong peers are never timed
        tc = row["peers"]["torch.compile"]["ratio"]  # torch.compile of the reference: one peer among them
        assert tc["lo"] <= tc["value"] <= tc["hi"] and 1.99 < tc["value"] < 2.01
        r = row["peers"]["engine"]["ratio"]
        assert r["lo"] <= r["value"] <= r["hi"] and 1.49 < r["value"] < 1.51 and r["n"] >= 6
        assert row["peers"]["engine"]["us"] == pytest.approx(1.5 * row["champion_us"], rel=0.01)
        assert row["champion_pct_ceiling"] > row["peers"]["engine"]["pct_ceiling"] > 0
    assert any(ln.startswith(f"peers of champion #{champ.id}: engine / champion: T1_H4096 1.50") for ln in lines)
    assert any("broken: not timed: fails correctness" in ln for ln in lines)

    md = render_log(camp.ledger.attempts(), camp.ledger.all_meta())
    peer = md.split("## Peer\n", 1)[1].split("\n## ", 1)[0]
    assert f"Peer kernels beside champion #{champ.id}" in peer
    assert "| T1_H4096 | champion #" in peer and "| ″ | engine | " in peer
    assert "| ″ | torch.compile | " in peer and "- torch.compile: family torch.compile of the float32" in peer
    assert "| broken |" not in peer and "| other |" not in peer and "- broken: family engine_fused_add_rmsnorm" in peer
    assert "not timed: fails correctness" in peer
    engine_row = next(ln for ln in peer.splitlines() if ln.startswith("| ″ | engine |"))
    assert "1.50" in engine_row.split("|")[6] and "[" in engine_row and "%" in engine_row


def test_recorded_backend_says_the_peers_were_not_timed(tmp_path, monkeypatch):
    monkeypatch.setenv("EVO_CACHE_DIR", str(tmp_path / "cache"))
    cfg = load_config(_config(tmp_path, f"[{PEER}]", attempts=2))
    lines: list[str] = []
    camp = Campaign(cfg, out=lines.append, command="pytest")
    camp.run()
    (rec,) = camp.ledger.meta(META_KEY)
    assert "recorded backend runs no peer kernel" in rec["not_timed"] and not rec["geometries"]
    md = render_log(camp.ledger.attempts(), camp.ledger.all_meta())
    assert "No peer kernel timed: the recorded backend runs no peer kernel" in md

    # `evo peers` times them again beside the champion: here, says again that they are not timed (exit 1)
    from evo.cli import main

    assert main(["peers", str(cfg.path)]) == 1
    assert len(camp.ledger.meta(META_KEY)) == 2
    assert "No peer kernel timed" in (cfg.log_dir / "attempts.md").read_text()
    none = _config(tmp_path, "[]")
    assert main(["peers", str(none)]) == 2


@pytest.mark.gpu
def test_gpu_times_two_families_interleaved(tmp_path, monkeypatch):
    """On a GPU: the tutorial kernel's campaign with the engine's in-place kernel as its peer, and a broken copy of
    that peer (half its rows return early): the first is timed beside the champion, the second refused."""
    from harness.gpu import gpu_available

    if not gpu_available():
        pytest.skip("no CUDA GPU is visible")
    monkeypatch.setenv("EVO_CACHE_DIR", str(tmp_path / "cache"))
    broken = tmp_path / "broken_peer"
    shutil.copytree(PEER, broken)
    src = (broken / "kernel.cu").read_text()
    edit = "  const long row = (long)blockIdx.x * hidden_size;\n"
    assert edit in src
    (broken / "kernel.cu").write_text(src.replace(edit, edit + "  if (2 * blockIdx.x >= gridDim.x) return;\n"))
    kernels = f"[{{family: {PEER}, name: engine}}, {{family: {broken}, name: broken}}]"
    cfg = load_config(_config(tmp_path, kernels, backend="gpu", attempts=4, extra="worker: {isolation: worker}\n"))
    camp = Campaign(cfg, out=print, command="pytest")
    camp.run()
    (rec,) = camp.ledger.meta(META_KEY)
    assert rec["peers"]["engine"]["correct"] is True, rec["peers"]["engine"]
    assert rec["peers"]["broken"]["error"].startswith("fails correctness"), rec["peers"]["broken"]
    for g in ("T1_H4096", "T32_H4096"):
        r = rec["geometries"][g]["peers"]["engine"]["ratio"]
        assert r["lo"] <= r["value"] <= r["hi"] and r["n"] >= 6
        assert "broken" not in rec["geometries"][g]["peers"]
    md = render_log(camp.ledger.attempts(), camp.ledger.all_meta())
    assert "| ″ | engine | " in md
    if os.environ.get("OUT"):  # the device machine's folder of what comes back: the log as the run wrote it
        Path(os.environ["OUT"], "peer-kernels-gpu-test.md").write_text(md)


def test_a_worker_loads_a_peer_with_its_name(tmp_path):
    """worker.isolation: the child's backend gets the peer's name with the module (it launches it as that family's)."""
    from harness.worker import WorkerBackend

    wb = WorkerBackend("fake_backend:peer_echo_backend", {}, timeout_s=30)
    try:
        assert wb.peer_kernels is True
        peer = wb.load(None, {"block": "engine"}, peer="engine")
        assert wb.correctness(peer) == {"genome": {"block": "engine"}, "peer": "engine"}
        assert wb.correctness(wb.load(None, {"block": 256}))["peer"] is None
    finally:
        wb.close()


def test_evo_check_refuses_a_peer_of_another_reference(tmp_path, monkeypatch):
    """A peer whose float64 reference differs on the campaign's inputs (eps 1e-2 where the campaign's is 1e-6) is
    another problem: `evo check` says so in one line (a run records it untimed with that reason: the test above)."""
    from evo.check import run_check

    monkeypatch.setenv("EVO_CACHE_DIR", str(tmp_path / "cache"))
    other = tmp_path / "other_eps"
    shutil.copytree(PEER, other)
    fam = other / "family.py"
    fam.write_text(fam.read_text().replace("EPS = 1e-6", "EPS = 1e-2"))
    cfg = _config(tmp_path, f"[{{family: {other}, name: other}}]")
    ok, line = run_check(cfg, sample=1, gpu=False, say=lambda s: None)
    assert not ok
    assert line.startswith("evo check: FAIL: peer other (engine_fused_add_rmsnorm): not the campaign's problem: ")
    assert "its reference's out differs from the campaign's" in line and "\n" not in line
    ok, line = run_check(_config(tmp_path, f"[{PEER}]"), sample=1, gpu=False, say=lambda s: None)
    assert ok, line


def test_gpu_backend_runs_an_in_place_peer_on_the_campaigns_inputs(monkeypatch):
    """harness/gpu.py's correctness run with a peer's module (Loaded.family): its in-out outputs start as copies of
    the campaign's inputs (its init_from, not the campaign's poison), and its outputs are held against the campaign's
    reference. The kernels are CPU stand-ins: the campaign's out of place, the engine's in place (wrong rows where
    its genome says block 128)."""
    import contextlib

    import torch

    from evo.core.family import Geometry, load_family
    from evo.measure.peer_kernels import outputs_problem
    from harness.gpu import GpuBackend, Loaded

    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    fam, peer = load_family(str(EX)), load_family(str(PEER))
    g = Geometry("T4_H256", {"T": 4, "H": 256})

    class Sim(GpuBackend):
        def __init__(self):  # no CUDA: torch on the CPU, Python "kernels"
            self.torch, self.family, self.geometries, self.seeds, self.runs = torch, fam, [g], 3, 2
            self.device, self.stream = torch.device("cpu"), type("S", (), {"synchronize": lambda self: None})()
            self._inputs, self._refs, self._base_out, self._outbuf, self._pristine = {}, {}, {}, {}, {}
            self._guards, self.baseline_hashes, self.baseline_errors = {}, {}, {}

        def _sync(self) -> None:
            pass

        def _launcher(self, loaded, g, inputs, outs):
            def launch():
                if loaded.family is None:  # the campaign's kernel: out of place
                    ref = fam.reference(inputs, g, dtype=torch.float32)
                    for n, t in outs.items():
                        t.copy_(ref[n].to(t.dtype))
                    return
                r = (outs["out"].float() + outs["residual_out"].float()).to(torch.bfloat16)  # in place
                y = r.float() * torch.rsqrt(r.float().pow(2).mean(-1, keepdim=True) + 1e-6) * inputs["weight"].float()
                if loaded.genome["block"] == 128:
                    y[::2] = 0.0
                outs["residual_out"].copy_(r)
                outs["out"].copy_(y.to(torch.bfloat16))

            return launch

    b = Sim()
    b.correctness(Loaded(None, fam.baseline(), {}), freeze=True)
    right = b.correctness(Loaded(None, peer.baseline(), {}, family=peer))
    assert outputs_problem(right, fam.error_bound) is None
    assert all(c.rel_err is not None and c.rel_err < 1e-2 for c in right.checks)
    wrong = b.correctness(Loaded(None, peer.genome({"block": 128}), {}, family=peer))
    assert outputs_problem(wrong, fam.error_bound).startswith("out at T4_H256 seed 0 has relative error")
