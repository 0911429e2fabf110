"""In-place and in-out arguments (issue #40, item 3), on the CPU.

The family of tests/families/inplace_rmsnorm declares in-out outputs (``OutputSpec(init_from=...)``); its kernel
overwrites its input and residual as the engines' fused add + RMSNorm does. Here the GPU backend's correctness,
recheck and timing buffers run on torch CPU tensors with a Python stand-in for the kernel that works in place
through exactly the pointers ``kernel_args`` hands it: the harness must start the in-out buffers from their
inputs, see rows never written although they hold no poison, see a kernel that writes an input (and set it back),
and `evo check` must hold ``init_from`` against make_inputs.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import torch

from evo.check import CheckFailed, check_arguments
from evo.core.family import Geometry, OutputSpec, inout_problem, load_family
from evo.core.records import Code
from gates.correctness import baseline_problem, correctness_gate
from harness.gpu import Loaded
from harness.inout import snapshot, unwritten_inout, written_inputs
from tests.test_gpu_logic_cpu import CpuSim

FOLDER = Path(__file__).parent / "families" / "inplace_rmsnorm"
GEOS = [Geometry("T6_H64", {"T": 6, "H": 64}), Geometry("T3_H96", {"T": 3, "H": 96})]


@pytest.fixture(autouse=True)
def _no_cuda_streams(monkeypatch):
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)


@pytest.fixture(scope="module")
def fam():
    return load_family(str(FOLDER))


class InplaceSim(CpuSim):
    """The in-place kernel in Python: it reads and writes the buffers kernel_args gives it, as the GPU would."""

    def _launcher(self, loaded, g, inputs, outs):
        def launch():
            self.calls += 1
            x, res, w, eps, T, H = self.family.kernel_args(inputs, outs, g)
            kind = loaded.genome.get("_fault") or self.fault
            r = (x.float() + res.float()).to(torch.bfloat16)
            inv = torch.rsqrt(r.float().pow(2).mean(dim=-1, keepdim=True) + eps)
            normed = (r.float() * inv * w.float()).to(torch.bfloat16)
            rows = slice(0, (T + 1) // 2) if kind == "half_rows" else slice(0, T)
            res[rows] = r[rows]  # in place: the sum over the residual, the normalized row over the input
            x[rows] = normed[rows]
            if kind == "odd_rows_keep_input":
                x[1::2] = inputs["x"][1::2]  # odd rows keep what the buffer started as
            if kind == "writes_weight":
                w.mul_(2)  # the kernel scales the weight it was given to read

        return launch


def _setup(fam, fault=None):
    be = InplaceSim(fam, GEOS, fault=fault)
    base = Loaded(None, fam.baseline(), {})
    ev = be.correctness(base, freeze=True)
    return be, base, ev


def test_in_out_outputs_start_as_their_inputs_and_pass(fam):
    be, _, ev = _setup(fam)
    assert baseline_problem(ev, fam.error_bound) is None
    assert not ev.written_inputs
    for c in ev.checks:
        assert c.unwritten == 0 and c.nonfinite == 0 and len(set(c.hashes)) == 1, c
        assert c.rel_err is not None and c.rel_err <= fam.error_bound(c.output), c
    # the kernel ran in place on the output buffers: the cached inputs are as make_inputs gave them
    for g in GEOS:
        for seed in range(be.seeds):
            again = fam.make_inputs(g, seed, "cpu")
            assert all(torch.equal(be.inputs(g, seed)[k], again[k]) for k in again)
    cand = Loaded(None, fam.baseline().replace(block=512), {})
    assert correctness_gate(be.correctness(cand), be.baseline_hashes, "exact").ok


@pytest.mark.parametrize("fault", ["half_rows", "odd_rows_keep_input"])
def test_rows_never_written_in_place_are_rejected(fam, fault):
    """A buffer that starts as its input holds no poison: rows the kernel skips still read as unwritten, in exact
    and tolerance mode, because the reference changes them and they kept their initial bits."""
    be, _, _ = _setup(fam)
    be.fault = fault
    ev = be.correctness(Loaded(None, fam.baseline().replace(block=128), {}))
    for mode in ("exact", "tolerance"):
        v = correctness_gate(ev, be.baseline_hashes, mode, None, be.baseline_errors, 2.0)
        assert v.code is Code.CORRECTNESS_UNWRITTEN and "never written" in v.reason, v
    per = {c.output: c.unwritten for c in ev.checks if c.geometry == "T6_H64"}
    assert per["out"] >= 3 * 64 * 0.9  # three of six rows, nearly every element of them
    assert (per["residual_out"] > 0) == (fault == "half_rows")


def test_a_kernel_that_writes_its_input_is_rejected_and_the_input_set_back(fam):
    be, _, _ = _setup(fam)
    be.fault = "writes_weight"
    cand = Loaded(None, fam.baseline().replace(block=128), {})
    ev = be.correctness(cand)
    v = correctness_gate(ev, be.baseline_hashes, "tolerance", None, be.baseline_errors, 2.0)
    assert v.code is Code.CORRECTNESS_INPUT_WRITTEN, v
    assert v.reason.startswith("the kernel wrote its input weight at T6_H64 seed 0 (64 of 64 elements changed)")
    assert v.detail == {"input": "weight", "geometry": "T6_H64"}
    assert len(ev.written_inputs) == len(GEOS) * be.seeds * be.runs  # every launch seen, each set back
    assert "wrote its input weight" in be.recheck(cand)
    be.fault = None  # the inputs were set back: the next candidate is judged on the inputs the baseline saw
    assert correctness_gate(be.correctness(cand), be.baseline_hashes, "exact").ok
    assert be.recheck(cand) is None


def test_a_baseline_that_writes_its_input_cannot_be_the_reference(fam):
    _, _, ev = _setup(fam, fault="writes_weight")
    why = baseline_problem(ev, fam.error_bound)
    assert why is not None and why.startswith("the baseline writes its input weight at T6_H64 seed 0")
    assert "init_from='weight'" in why


def test_recheck_starts_the_in_out_outputs_from_their_inputs_again(fam):
    be, base, _ = _setup(fam)
    cand = Loaded(None, fam.baseline().replace(block=1024), {})
    be.correctness(cand)
    for g in GEOS:  # timing ran in place on the guarded buffers' values (drifted), as the engine's loop does
        for _ in range(3):
            be._launcher(cand, g, be.inputs(g, 0), be._outputs(g))()
    assert be.recheck(cand) is None
    be.fault = "half_rows"
    assert "changed after the timed runs" in be.recheck(cand)


def test_timing_buffers_start_as_the_inputs_in_their_own_memory(fam):
    be, _, _ = _setup(fam)
    g = GEOS[0]
    outs = be._timing_outputs(g)
    inputs = be.inputs(g, 0)
    assert torch.equal(outs["out"], inputs["x"]) and torch.equal(outs["residual_out"], inputs["residual"])
    assert outs["out"].data_ptr() != inputs["x"].data_ptr()
    launch = be._launcher(Loaded(None, fam.baseline(), {}), g, inputs, outs)
    launch()
    launch()  # values drift launch after launch (the residual accumulates); the inputs never move
    assert not torch.equal(outs["residual_out"], inputs["residual"])
    assert torch.equal(inputs["residual"], fam.make_inputs(g, 0, "cpu")["residual"])


def test_unwritten_rule_counts_changed_values_left_as_they_started():
    init = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], dtype=torch.bfloat16)
    ref = torch.tensor([1.5, 2.0, 3.0 + 2**-7, 4.0, 7.0], dtype=torch.float64)  # [2]: under one ulp of 3.0 (2^-6)
    out = torch.tensor([1.0, 2.0, 3.0, 4.5, 7.0], dtype=torch.bfloat16)
    # [0] changes and kept its start: unwritten; [1] does not change; [2] a rounding away; [3] written (to a wrong
    # value: the error check's business); [4] written right
    assert unwritten_inout(out, init, ref) == 1
    assert unwritten_inout(init.clone(), init, ref) == 2  # nothing written: [0] and [4]
    ints = torch.tensor([1, 2, 3], dtype=torch.int32)
    assert unwritten_inout(ints.clone(), ints, torch.tensor([1.0, 5.0, 3.0], dtype=torch.float64)) == 1


def test_written_inputs_names_each_change_and_sets_it_back():
    inputs = {"a": torch.arange(6.0), "b": torch.ones(3, dtype=torch.bfloat16), "n": 7}
    keep = snapshot(inputs)
    assert written_inputs(inputs, keep) == []
    inputs["b"][1] = -0.0 + 5
    inputs["a"][:2] = -1
    assert written_inputs(inputs, keep) == [("a", 2), ("b", 1)]
    assert torch.equal(inputs["a"], torch.arange(6.0)) and written_inputs(inputs, keep) == []
    z = {"z": torch.zeros(2)}
    keep = snapshot(z)
    z["z"][0] = -0.0  # other bits, equal values: a write all the same
    assert written_inputs(z, keep) == [("z", 1)]


def test_init_from_is_held_against_make_inputs():
    inputs = {"x": torch.zeros(4, 8, dtype=torch.bfloat16), "w": torch.zeros(8, dtype=torch.float32), "eps": 1e-6}
    ok = [OutputSpec("out", "bfloat16", (32,), init_from="x"), OutputSpec("y", "float32", (2, 4))]
    assert inout_problem(ok, inputs) is None
    cases = {
        "nope": ("bfloat16", (4, 8), "init_from='nope' is not a tensor of make_inputs (its tensors: w, x)"),
        "eps": ("bfloat16", (4, 8), "is not a tensor of make_inputs"),
        "w": ("bfloat16", (8,), "init_from='w' is float32, the output bfloat16"),
        "x": ("bfloat16", (4, 4), "init_from='x' has 32 elements, the output's shape (4, 4) 16"),
    }
    for src, (dtype, shape, want) in cases.items():
        got = inout_problem([OutputSpec("out", dtype, shape, init_from=src)], inputs)
        assert got is not None and want in got and got.startswith(f"output out: init_from={src!r}"), got
    two = [OutputSpec("a", "bfloat16", (32,), init_from="x"), OutputSpec("b", "bfloat16", (32,), init_from="x")]
    assert inout_problem(two, inputs) == "outputs a and b both start from 'x' (one in-out buffer per input)"
    with pytest.raises(ValueError, match="init_from is ''"):
        OutputSpec("out", "bfloat16", (1,), init_from="")


def test_evo_check_holds_init_from_and_the_in_out_pointer(fam, monkeypatch):
    """On the CPU, with no GPU: a declaration that names no input of that dtype and size, or kernel_args that
    hands the kernel the input instead of the in-out output, fails in one line."""
    g = fam.small_geometry()
    inputs = fam.make_inputs(g, 0, "cpu")
    ref = fam.reference(inputs, g)
    check_arguments(fam, inputs, g, ref)  # as written: passes
    specs = fam.outputs(g)
    bad = [OutputSpec("out", "bfloat16", specs[0].shape, init_from="weight"), specs[1]]
    monkeypatch.setattr(type(fam), "outputs", lambda self, geo: bad)
    with pytest.raises(CheckFailed, match=r"^outputs at T4_H256: output out: init_from='weight' has 256 elements"):
        check_arguments(fam, inputs, g, ref)
    monkeypatch.setattr(type(fam), "outputs", lambda self, geo: specs)
    real = type(fam).kernel_args

    def passes_the_input(self, inp, outs, geo):
        args = real(self, inp, outs, geo)
        args[1] = inp["residual"]
        return args

    monkeypatch.setattr(type(fam), "kernel_args", passes_the_input)
    with pytest.raises(CheckFailed, match=r"kernel_args\[1\] is the input residual, which output residual_out"):
        check_arguments(fam, inputs, g, ref)


def test_evo_check_on_the_cpu_fails_a_wrong_init_from_in_one_line(tmp_path):
    import shutil

    from evo.check import run_check

    folder = tmp_path / "inplace_rmsnorm"
    shutil.copytree(FOLDER, folder, ignore=shutil.ignore_patterns("__pycache__"))
    ok, line = run_check(folder / "evo.yaml", sample=0, gpu=False, say=lambda s: None)
    assert ok, line
    fam_py = folder / "family.py"
    fam_py.write_text(fam_py.read_text().replace('init_from="residual"', 'init_from="residuals"'))
    ok, line = run_check(folder / "evo.yaml", sample=0, gpu=False, say=lambda s: None)
    assert not ok and "\n" not in line
    assert line == (
        "evo check: FAIL: outputs at T4_H256: output residual_out: init_from='residuals' is not a tensor of "
        "make_inputs (its tensors: residual, weight, x)"
    )
