"""Bring your own kernel: families found by path, EVO_FAMILY_PATH and entry points; broken ones are one line;
`evo new` and `evo check`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from evo.check import run_check
from evo.config import ConfigError, load_config
from evo.core.family import CANDIDATES_DIR, FamilyError, find_families, load_family, resolve_family
from evo.scaffold import ScaffoldError, new_family, read_entries

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "configs" / "mhc_pre_big_fuse.yaml"


def evo(cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    e = {**os.environ, "PYTHONPATH": str(ROOT), "EVO_CACHE_DIR": str(cwd / ".cache"), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "evo", *args], cwd=cwd, env=e, capture_output=True, text=True, timeout=timeout
    )


def copy_family(dest: Path, name: str = "mhc_pre_big_fuse") -> Path:
    shutil.copytree(CANDIDATES_DIR / name, dest, ignore=shutil.ignore_patterns("__pycache__", "recorded"))
    return dest


def config_for(path: Path, family: str, **extra) -> Path:
    raw = yaml.safe_load(SHIPPED.read_text())
    raw.update(family=family, storage=f"sqlite:///{path.parent / 'ledger.db'}", **extra)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


# --- where families come from ----------------------------------------------------------------------------


def test_a_path_in_the_config_is_relative_to_the_config_file(tmp_path, monkeypatch):
    copy_family(tmp_path / "fams" / "mine")
    cfg = config_for(tmp_path / "cfgs" / "c.yaml", "../fams/mine")
    monkeypatch.chdir(tmp_path / "fams")  # not the config's folder: the path must not depend on it
    c = load_config(cfg)
    assert c.family.folder == (tmp_path / "fams" / "mine").resolve() and c.family.name == "mhc_pre_big_fuse"
    assert resolve_family("../fams/mine", base=tmp_path / "cfgs").origin == "path"
    with pytest.raises(ConfigError, match=r"'\./nothere' is a path, and .* does not exist"):
        load_config(config_for(tmp_path / "cfgs" / "d.yaml", "./nothere"))


@pytest.mark.parametrize("bad", ["a b", "x;y", "-x", "", "é"])
def test_a_name_that_is_no_name_is_refused_in_one_line(bad):
    with pytest.raises(FamilyError) as e:
        load_family(bad)
    assert "is not a family name" in str(e.value) and "\n" not in str(e.value)


def test_names_never_leave_their_folders(tmp_path):
    """``..`` and anything with a slash are paths (said so when nothing is there), never names to search."""
    with pytest.raises(FamilyError, match="is a path"):
        load_family("../candidates", base=tmp_path)
    with pytest.raises(FamilyError, match="is a path"):
        load_family("x/../../etc", base=tmp_path)


def test_evo_family_path_finds_families_by_name_first(tmp_path, monkeypatch):
    copy_family(tmp_path / "a" / "mhc_pre_big_fuse")
    copy_family(tmp_path / "b" / "second_fam")
    monkeypatch.setenv(
        "EVO_FAMILY_PATH", os.pathsep.join([str(tmp_path / "a"), str(tmp_path / "nope"), str(tmp_path / "b")])
    )
    found = [(s.name, s.origin) for s in find_families()]
    assert ("second_fam", "EVO_FAMILY_PATH") in found
    assert found.index(("mhc_pre_big_fuse", "EVO_FAMILY_PATH")) < found.index(("mhc_pre_big_fuse", "shipped"))
    assert load_family("mhc_pre_big_fuse").folder == tmp_path / "a" / "mhc_pre_big_fuse"  # shadows the shipped one
    assert load_family("second_fam").folder == tmp_path / "b" / "second_fam"


def test_installed_packages_give_families_through_entry_points(tmp_path, monkeypatch):
    site = tmp_path / "site"
    copy_family(site / "acme_kernels" / "gate")
    (site / "acme_kernels" / "__init__.py").write_text("")
    dist = site / "acme_kernels-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-kernels\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[evo.families]\nacme_gate = acme_kernels.gate.family\n")
    monkeypatch.syspath_prepend(str(site))
    src = next(s for s in find_families() if s.name == "acme_gate")
    assert src.origin == "entry point acme-kernels"
    fam = load_family("acme_gate")
    assert fam.folder == (site / "acme_kernels" / "gate").resolve() and fam.kernel_path.is_file()
    r = evo(tmp_path, "families", env={"PYTHONPATH": f"{site}{os.pathsep}{ROOT}"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert any(
        ln.startswith("mhc_pre_big_fuse: ") and "[entry point acme-kernels: " in ln for ln in r.stdout.splitlines()
    ), r.stdout  # the family's own name, from the package


# --- broken families: one line naming them, everywhere -----------------------------------------------------

BROKEN = {
    "syntax": (
        "family.py",
        lambda s: s.replace("class MhcPreBigFuse(Family):", "class MhcPreBigFuse(Family)"),
        "family.py line",
    ),
    "bad_default": (
        "family.py",
        lambda s: s.replace('Knob("block", (128, 256, 512), 256', 'Knob("block", (128, 256, 512), 999'),
        "ValueError: knob block: default 999 not in (128, 256, 512)",
    ),
    "no_method": (
        "family.py",
        lambda s: s.replace("    def outputs(self, geometry: Geometry)", "    def outputz(self, geometry: Geometry)"),
        "abstract method",
    ),
    "no_family": (
        "family.py",
        # (the module's own later uses of FAMILY, as mhc_pre_decode's DECODE_FAMILY makes, follow the rename)
        lambda s: re.sub(r"\bFAMILY\.", "FAMILIES.", s.replace("FAMILY = MhcPreBigFuse(", "FAMILIES = MhcPreBigFuse(")),
        "does not define FAMILY",
    ),
    "raises": (
        "family.py",
        lambda s: s.replace("HC = 4\n", "HC = 4\nraise RuntimeError('boom at import')\n"),
        "RuntimeError: boom at import",
    ),
    "no_kernel": ("kernel.cu", None, "no kernel source"),
}


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    root = tmp_path_factory.mktemp("broken")
    for name, (file, edit, _) in BROKEN.items():
        folder = copy_family(root / "fams" / f"bad_{name}")
        p = folder / file
        if edit is None:
            p.unlink()
        else:
            new = edit(p.read_text())
            assert new != p.read_text(), name
            p.write_text(new)
    return root


def test_evo_families_lists_each_broken_family_in_one_line_and_the_rest(broken):
    r = evo(broken, "families", env={"EVO_FAMILY_PATH": str(broken / "fams")})
    assert r.returncode == 1 and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    for name, (_, _, why) in BROKEN.items():
        mine = [ln for ln in lines if f"bad_{name}" in ln]
        assert len(mine) == 1 and mine[0].startswith(f"cannot load family bad_{name} (") and why in mine[0], mine
    for shipped in ("fp4_matvec", "mhc_pre_big_fuse", "mhc_prenorm_gemm", "moe_q2_matvec"):
        assert any(ln.startswith(f"{shipped}: ") for ln in lines), r.stdout  # the others are still listed


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_evo_run_and_check_name_a_broken_family_in_one_line(broken, name):
    cfg = config_for(broken / "cfgs" / f"{name}.yaml", f"../fams/bad_{name}")
    why = BROKEN[name][2]
    r = evo(broken, "run", str(cfg), "--backend", "recorded")
    assert r.returncode == 2 and "Traceback" not in r.stdout + r.stderr, r.stderr
    assert len(r.stderr.splitlines()) == 1 and f"family bad_{name}" in r.stderr and why in r.stderr, r.stderr
    assert not (broken / "cfgs" / "ledger.db").exists()  # nothing written
    r = evo(broken, "check", str(cfg))
    assert r.returncode == 2 and "Traceback" not in r.stdout + r.stderr  # a usage error, as evo run says it
    last = r.stdout.splitlines()[-1]
    assert last.startswith("evo check: FAIL: config error: family: ") and f"bad_{name}" in last and why in last


def test_small_mistakes_get_the_message_that_fits(tmp_path):
    assert evo(tmp_path, "new", "mine").returncode == 0
    r = evo(tmp_path, "check", "mine")  # the family's folder, not its config
    assert r.returncode == 2 and "mine is a folder: give its campaign YAML, e.g. mine/evo.yaml" in r.stdout, r.stdout
    r = evo(tmp_path, "check", "mine/family.py")
    assert r.returncode == 2 and "is Python (a family?): give its campaign YAML, e.g. " in r.stdout, r.stdout
    cfg = tmp_path / "mine" / "evo.yaml"
    cfg.write_text(cfg.read_text().replace("family: .", "family: ./nowhere"))
    r = evo(tmp_path, "check", str(cfg))
    assert r.returncode == 2 and "does not exist" in r.stdout, r.stdout


# --- evo new / evo check -----------------------------------------------------------------------------------


def test_evo_new_writes_a_starter_that_evo_check_passes(tmp_path):
    r = evo(tmp_path, "new", "my_axpy")
    assert r.returncode == 0, r.stderr
    folder = tmp_path / "my_axpy"
    assert sorted(p.name for p in folder.iterdir()) == ["evo.yaml", "family.py", "kernel.cu", "test_family.py"]
    src = (folder / "kernel.cu").read_text()
    assert "#include <cuda_bf16.h>" in src and "template <int BLOCK, int VEC>" in src
    r = evo(tmp_path, "check", "my_axpy/evo.yaml", "--sample", "4", "--cpu")
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.match(
        r"evo check: pass \(my_axpy: baseline and \d+ sampled genomes compiled \(every knob value in one",
        r.stdout.splitlines()[-1],
    ), r.stdout
    r = evo(tmp_path, "new", "my_axpy")  # never into an existing folder
    assert r.returncode == 2 and "exists" in r.stderr and len(r.stderr.splitlines()) == 1


def _starter_with_an_engine_header(tmp_path: Path) -> Path:
    """The starter family, its Pack struct moved into the engine's own header folder, which only the config's
    build.include_dirs names (as a family kept in an engine's repo includes that repo's headers)."""
    assert evo(tmp_path, "new", "packed").returncode == 0
    folder = tmp_path / "packed"
    src = (folder / "kernel.cu").read_text()
    start, end = src.index("template <int VEC>\nstruct"), src.index("};\n", src.index("struct alignas")) + 3
    inc = tmp_path / "engine" / "include"
    inc.mkdir(parents=True)
    (inc / "pack.cuh").write_text("#pragma once\n#include <cuda_bf16.h>\n" + src[start:end])
    (folder / "kernel.cu").write_text(src[:start] + "#include <pack.cuh>\n" + src[end:])
    cfg = folder / "evo.yaml"
    cfg.write_text(cfg.read_text() + "build: {include_dirs: [../engine/include]}\n")
    return folder


def test_an_idea_compiles_with_the_configs_header_folders(tmp_path):
    from evo.search.ideas import make_patch

    folder = _starter_with_an_engine_header(tmp_path)
    r = evo(tmp_path, "check", "packed/evo.yaml", "--sample", "2", "--cpu")
    assert r.returncode == 0, r.stdout + r.stderr
    src = (folder / "kernel.cu").read_text()
    patch = tmp_path / "unroll.patch"
    patch.write_text(
        "Title: no unroll\nRationale: fewer instructions\n\n"
        + make_patch(src, src.replace("#pragma unroll\n", "#pragma unroll 1\n"))
    )
    r = evo(tmp_path, "idea", "add", "./packed", str(patch), "--config", "packed/evo.yaml")
    assert r.returncode == 0 and "idea unroll registered" in r.stdout, r.stdout + r.stderr
    (folder / "ideas" / "unroll.patch").unlink()
    r = evo(tmp_path, "idea", "add", "./packed", str(patch))  # without the config its header is not found
    assert r.returncode == 2 and "pack.cuh" in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr


def test_a_familys_include_folder_that_is_not_there_is_one_line(tmp_path):
    folder = _starter_with_an_engine_header(tmp_path)
    fam_py = folder / "family.py"
    fam_py.write_text(
        fam_py.read_text().replace("FAMILY = Packed(", "FAMILY = Packed(\n    include_dirs=('../engine/inclde',),")
    )
    for args in (("check", "packed/evo.yaml", "--cpu"), ("run", "packed/evo.yaml", "--attempts", "2")):
        r = evo(tmp_path, *args)
        assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
        out = (r.stdout + r.stderr).strip().splitlines()[-1]
        assert "include_dirs: '../engine/inclde' is not a folder" in out, out


ENGINE_KERNEL = textwrap.dedent("""\
    #include <cuda_bf16.h>
    // the reference study's mHC kernel signature, as an engine writes it
    template <int NUM_SPLITS, int BLOCK_SIZE = 256, bool COMPUTE_SQRSUM = false>
    __global__ void __launch_bounds__(BLOCK_SIZE) mhc_pre(const float* __restrict__ partial,
                                                          __nv_bfloat16* out, float eps, int T) {
      if (threadIdx.x < NUM_SPLITS && COMPUTE_SQRSUM) out[threadIdx.x] = __float2bfloat16(partial[0] * eps + T);
    }
    """)


def test_evo_new_around_a_users_kernel_reads_its_template_knobs_and_check_names_the_first_todo(tmp_path):
    (tmp_path / "mine.cu").write_text(ENGINE_KERNEL)
    (e,) = read_entries(ENGINE_KERNEL)
    assert e.name == "mhc_pre" and [t[1] for t in e.template] == ["NUM_SPLITS", "BLOCK_SIZE", "COMPUTE_SQRSUM"]
    assert e.expression() == "mhc_pre<{num_splits}, {block_size}, {compute_sqrsum}>"
    dest = new_family("mhc_pre", tmp_path, tmp_path / "mine.cu")
    assert (dest / "kernel.cu").read_text() == ENGINE_KERNEL
    fam_src = (dest / "family.py").read_text()
    assert 'entry="mhc_pre<{num_splits}, {block_size}, {compute_sqrsum}>"' in fam_src
    assert 'Knob("block_size", (256,), 256' in fam_src and 'Knob("compute_sqrsum", (False, True), False' in fam_src
    assert 'return "ppfi"' in fam_src
    ok, line = run_check(dest / "evo.yaml", gpu=False, say=lambda s: None)
    assert not ok and line.startswith("evo check: FAIL: evo.yaml line ") and "TODO" in line


NAMESPACED_KERNEL = textwrap.dedent("""\
    #include <cuda_bf16.h>
    #include "engine_utils.cuh"
    namespace myengine {
    namespace {  // anonymous: adds nothing to the name
    __device__ float unused_helper(float v) { return v; }
    }
    template <int BLOCK = 256, typename scalar_t = __nv_bfloat16>
    __global__ void __launch_bounds__(BLOCK) silu_and_mul(scalar_t* out, const scalar_t* x, int d) {
      const int i = blockIdx.x * BLOCK + threadIdx.x;
      if (i < d) out[i] = scalar_t(silu(float(x[i])) * float(x[d + i]));
    }
    }  // namespace myengine
    """)


def test_evo_new_reads_a_kernel_in_a_namespace_with_a_type_parameter_and_its_own_header(tmp_path):
    """An engine's kernel: inside its namespace, a typename parameter, a header of its own folder (evo new found
    the entry without its namespace, gave the type the value 0, and left the header out of the include path)."""
    src_dir = tmp_path / "engine" / "csrc"
    src_dir.mkdir(parents=True)
    (src_dir / "act.cu").write_text(NAMESPACED_KERNEL)
    (src_dir / "engine_utils.cuh").write_text(
        "#pragma once\n__device__ __forceinline__ float silu(float v) { return v / (1.0f + __expf(-v)); }\n"
    )
    r = evo(tmp_path, "new", "silu_and_mul", "--kernel", "engine/csrc/act.cu", "--link", "-o", "tuning")
    assert r.returncode == 0, r.stderr
    assert "engine_utils.cuh beside your kernel" in r.stdout
    dest = tmp_path / "tuning" / "silu_and_mul"
    assert (dest / "kernel.cu").is_symlink() and (dest / "kernel.cu").resolve() == (src_dir / "act.cu").resolve()
    fam_src = (dest / "family.py").read_text()
    assert 'entry="myengine::silu_and_mul<{block}, {scalar_t}>"' in fam_src
    assert 'Knob("scalar_t", ("__nv_bfloat16",), "__nv_bfloat16"' in fam_src
    assert 'include_dirs=("../../engine/csrc",)' in fam_src
    fam = load_family(str(dest))
    from harness.build import Builder

    built = Builder(fam, [], "sm_90").build(fam.baseline())  # the header found, the entry looked up by NVRTC
    assert all(m.function.startswith("_ZN8myengine12silu_and_mul") for m in built.modules.values())
    ok, line = run_check(dest / "evo.yaml", gpu=False, say=lambda s: None)
    assert not ok and "TODO(evo)" in line
    # an idea as `git diff` of the engine's file writes it: its path names the file kernel.cu links to
    from evo.search.ideas import make_patch

    src = (src_dir / "act.cu").read_text()
    diff = make_patch(src, src.replace("if (i < d)", "if (i < d) [[likely]]"))
    diff = diff.replace("a/kernel.cu", "a/engine/csrc/act.cu").replace("b/kernel.cu", "b/engine/csrc/act.cu")
    (tmp_path / "likely.patch").write_text("Title: likely\nRationale: a hint\n\n" + diff)
    r = evo(tmp_path, "idea", "add", "./tuning/silu_and_mul", "likely.patch")
    assert r.returncode == 0 and "idea likely registered" in r.stdout, r.stdout + r.stderr
    (e,) = read_entries("__global__ void plain(float* y) { y[0] = 1.f; }")  # C++ linkage: NVRTC finds it by name
    assert e.expression() == "::plain"
    (e,) = read_entries('extern "C" __global__ void plain(float* y) { y[0] = 1.f; }')
    assert e.expression() == "plain"


def test_evo_check_counts_only_evo_news_marks_as_todo(tmp_path):
    assert evo(tmp_path, "new", "mine").returncode == 0
    fam_py = tmp_path / "mine" / "family.py"
    fam_py.write_text(
        fam_py.read_text().replace("from __future__", "# TODO: take eps from the model config\nfrom __future__", 1)
    )
    r = evo(tmp_path, "check", "mine/evo.yaml", "--sample", "1", "--cpu")
    assert r.returncode == 0, r.stdout + r.stderr


def _starter(tmp_path: Path, edit: Callable[[str], str] | None = None, kernel_edit=None) -> Path:
    assert evo(tmp_path, "new", "st").returncode == 0
    folder = tmp_path / "st"
    for name, f in (("family.py", edit), ("kernel.cu", kernel_edit)):
        if f:
            text = (folder / name).read_text()
            assert f(text) != text
            (folder / name).write_text(f(text))
    return folder / "evo.yaml"


def _drop_n(s: str) -> str:
    return s.replace('return "pppfi"', 'return "pppf"').replace(', geometry["n"]]', "]")


@pytest.mark.parametrize(
    "edit, expect",
    [
        (_drop_n, "arg_types 'pppf' has 4 letters; st in kernel.cu takes 5 parameters"),
        (
            lambda s: s.replace('return "pppfi"', 'return "pppfl"'),
            "parameter 4 of st in kernel.cu (int n) is 4 B at offset 28 in the cubin; 'l' passes 8 B",
        ),
        (lambda s: s.replace('return "pppfi"', 'return "pppff"'), "parameter 4 of st (int n) needs 'i', not 'f'"),
        (lambda s: s.replace(', geometry["n"]]', "]"), "kernel_args gives 4 arguments, arg_types 5 letters"),
        (
            lambda s: s.replace('inputs["scale"], geometry["n"]]', 'inputs["scale"], inputs["x"]]'),
            "kernel_args[4] is a Tensor",
        ),
        (
            lambda s: s.replace('+ inputs["y"].to(dt)}', '+ inputs["y"].to(dt))[:8]}').replace(
                '{"out": inputs', '{"out": (inputs'
            ),
            "has shape (8,)",
        ),
    ],
)
def test_evo_check_finds_on_the_cpu_what_only_the_gpu_would(tmp_path, edit, expect):
    """Arguments that do not match the kernel's signature, and a reference shaped unlike the output it is
    compared with, passed evo check on a CPU and launched a kernel reading garbage on the GPU."""
    ok, line = run_check(_starter(tmp_path, edit), sample=0, gpu=False, say=lambda s: None)
    assert not ok and expect in line, line


SECOND_USER = {  # a second new user's mistakes: each was a traceback, or a pass that only the GPU would refuse
    "check raises": (
        ("def check(self, genome: Mapping[str, Any], geometries: Sequence[Geometry]) -> str | None:\n", "\n"),
        ("", '        genome["blok"]\n'),
        "check(baseline) raised KeyError: 'blok'",
    ),
    "dtype": (('OutputSpec("out", "bfloat16"', ""), ('OutputSpec("out", "bf16"', ""), "outputs: out has dtype 'bf16'"),
    "launch tuple": (
        ("def launch(self, genome: Mapping[str, Any], geometry: Geometry) -> Launch:\n", "\n"),
        ("", "        return (1, 1)\n"),
        "gives a tuple, not a Launch",
    ),
    "block 2048": (('(genome["block"], 1, 1)', ""), ("(2048, 1, 1)", ""), "a block of 2048 threads"),
    "unseeded": (
        ("manual_seed(1000003 * seed + 7)", ""),
        ("manual_seed(int(torch.randint(0, 1 << 30, (1,))))", ""),
        "for the same seed",
    ),
    "include_dirs str": (("FAMILY = St(\n", ""), ('    include_dirs="inc",\n', ""), "include_dirs is 'inc': a tuple"),
    "stale fault": (
        ("    faults={", ""),
        ('"gone": ("no such text", "x"),', ""),
        "faults: fault 'gone' no longer applies",
    ),
}


@pytest.mark.parametrize("mistake", sorted(SECOND_USER))
def test_evo_check_names_a_second_users_mistakes_in_one_line(tmp_path, mistake):
    (anchor, end), (add, tail), expect = SECOND_USER[mistake]

    def edit(text: str) -> str:
        if add.startswith(("OutputSpec", "(2048", "manual_seed")):
            return text.replace(anchor, add)
        head = text.index(anchor) + len(anchor)
        if end:  # after the def line and its docstring
            head = (
                text.index('"""', text.index('"""', head) + 3) + 4 if text[head:].lstrip().startswith('"""') else head
            )
        return text[:head] + add + tail + text[head:] if tail else text[:head] + add + text[head:]

    ok, line = run_check(_starter(tmp_path, edit), sample=1, gpu=False, say=lambda s: None)
    assert not ok and expect in line and "\n" not in line, line


def _with_block_96(text: str) -> str:
    return text.replace("(64, 128, 256, 512, 1024), 256", "(64, 128, 256, 512, 1024, 96), 256")


def _whole_warps(text: str) -> str:
    return text.replace(
        "  if (i >= n) return;", '  static_assert(BLOCK % 64 == 0, "whole warps");\n  if (i >= n) return;'
    )


def test_the_signature_reader_takes_engine_kernels_as_written():
    from evo.scaffold import opaque_params, param_letter, split_params

    src = textwrap.dedent("""\
        namespace eng {
        __device__ void dbg() { printf("}\\n"); char c = '}'; }  // a brace in a string ends no namespace
        template <typename P = Pair<float, int>, typename V = Vec<Pack<float>, 4>, int B = 4>
        __global__ void __launch_bounds__(B*(2)) nested(float* y, const int64_t* idx, index_t n, double eps) {}
        __global__ void withif(float* y,
        #ifdef HAS_BIAS
          const float* bias,
        #endif
          int n) {}
        }
        """)
    nested, withif = read_entries(src)
    assert nested.name == "eng::nested" and [t[1] for t in nested.template] == ["P", "V", "B"]
    assert nested.template[0][2] == "Pair<float, int>" and nested.template[1][2] == "Vec<Pack<float>, 4>"
    assert [param_letter(x) for x in split_params(nested.params)] == ["p", "p", "?", "d"]  # index_t: either width
    assert not opaque_params(nested.params) and opaque_params(withif.params)  # #ifdef: not counted, not checked


def _numpy_scalars(s: str) -> str:
    return s.replace(
        'inputs["scale"], geometry["n"]]', 'np.float32(inputs["scale"]), np.int32(geometry["n"])]'
    ).replace("from __future__ import annotations\n", "from __future__ import annotations\n\nimport numpy as np\n")


def _guarded_params(s: str) -> str:
    return s.replace("float scale, int n)", "float scale,\n#ifdef EVO_NEVER\n  int unused,\n#endif\n  int n)")


def test_evo_check_takes_numpy_scalars_and_leaves_a_parameter_list_with_ifdefs_to_nvrtc(tmp_path):
    cfg = _starter(tmp_path, _numpy_scalars, _guarded_params)
    ok, line = run_check(cfg, sample=0, gpu=False, say=lambda s: None)
    assert ok, line


def test_evo_check_compiles_every_knob_value_and_says_what_exact_mode_freezes(tmp_path):
    """A knob value that does not compile is found whatever the sample's seed (8 random genomes of 40 missed it)."""
    cfg = _starter(tmp_path, _with_block_96, _whole_warps)
    for seed in range(3):
        ok, line = run_check(cfg, sample=1, seed=seed, gpu=False, say=lambda s: None)
        assert not ok and "block" in line and "96" in line and "whole warps" in line, line
    fam_py = cfg.parent / "family.py"
    text = fam_py.read_text().replace(", 96), 256", "), 256")
    fam_py.write_text(text.replace('doc="threads per block"', 'exact=False, doc="threads per block"'))
    notes: list[str] = []
    ok, line = run_check(cfg, sample=1, gpu=False, say=notes.append)
    assert ok and "every knob value in one" in line, line
    assert any("mode is exact: a genome that moves block" in n for n in notes), notes


def test_evo_new_refuses_what_it_cannot_do(tmp_path):
    with pytest.raises(ScaffoldError, match="cannot name a family"):
        new_family("../up", tmp_path)
    (tmp_path / "empty.cu").write_text("// nothing here\n")
    with pytest.raises(ScaffoldError, match="no __global__ function"):
        new_family("x", tmp_path, tmp_path / "empty.cu")
    assert not (tmp_path / "x").exists()


def test_evo_check_passes_a_shipped_config_on_the_cpu(tmp_path):
    r = evo(tmp_path, "check", str(SHIPPED), "--sample", "3", "--cpu")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "baseline [S=1,prenorm=0]" in r.stdout
    assert re.match(r"evo check: pass \(mhc_pre_big_fuse: baseline and \d+ sampled genomes", r.stdout.splitlines()[-1])


def test_a_shipped_config_is_found_by_name_from_any_folder(tmp_path):
    cfg = load_config("mhc_pre_big_fuse")
    assert cfg.path.name == "mhc_pre_big_fuse.yaml" and cfg.family.name == "mhc_pre_big_fuse"
    with pytest.raises(ConfigError, match="no such config file .* shipped one: fp4_matvec"):
        load_config(tmp_path / "nope.yaml")


def test_export_of_a_template_family_names_each_steps_instantiation(tmp_path, monkeypatch):
    """A template knob leaves kernel.cu unchanged, so each exported step appends the explicit instantiation it
    launches: the patch shows the template arguments change, and the file still builds to the genome's code."""
    from evo.report.export import step_source
    from harness.build import Builder

    monkeypatch.setenv("EVO_CACHE_DIR", str(tmp_path / "cache"))
    cfg = load_config(ROOT / "examples" / "fused_add_rmsnorm" / "evo.yaml")
    fam = cfg.family
    base, champ = fam.baseline(), fam.genome({"block": 512, "vec": 8, "cache": 2, "reduce": "all_warps"})
    a, b = step_source(fam, base, {}), step_source(fam, champ, {})
    assert a.endswith(
        "template __global__ void fused_add_rmsnorm<256, 1, 0, Reduce::warp0>("
        + a.rsplit("<256, 1, 0, Reduce::warp0>(", 1)[1]
    )
    changed = [(x, y) for x, y in zip(a.splitlines(), b.splitlines()) if x != y]
    assert len(changed) == 1 and "<512, 8, 2, Reduce::all_warps>" in changed[0][1]
    builder = Builder.for_config(cfg, "sm_90")
    exported = builder.build(champ, base_source=b)
    direct = builder.build(champ)
    assert exported.sass_sha256 == direct.sass_sha256  # the explicit instantiation is the same machine code
