"""evo as a user installs it: the built wheel in a fresh venv, used from a folder outside the checkout.

The venv sees this machine's site-packages for evo's dependencies (torch, cupy, optuna: gigabytes we do not
download again), but evo itself must come from the wheel: the test checks where it is imported from.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "fused_add_rmsnorm"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    work = tmp_path_factory.mktemp("wheel")
    # one build at a time in this checkout: under xdist both workers may run this module's fixture, and setuptools
    # writes (and we remove) build/ and evo_kernels.egg-info/ in the checkout itself
    lock = Path(tempfile.gettempdir()) / f"evo-wheel-{hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]}.lock"
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "-q",
                "--no-deps",
                "--no-build-isolation",
                "-w",
                str(work / "dist"),
                str(ROOT),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        shutil.rmtree(ROOT / "build", ignore_errors=True)  # setuptools' scratch folder in the checkout
        # and its metadata folder: on a PYTHONPATH naming the checkout, pip would take it for evo-kernels installed
        shutil.rmtree(ROOT / "evo_kernels.egg-info", ignore_errors=True)
    assert r.returncode == 0, r.stderr[-2000:]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "EVO_FAMILY_PATH")}
    (wheel,) = (work / "dist").glob("evo_kernels-*.whl")  # the distribution's name: evo-kernels
    env_dir = work / "venv"
    venv.create(env_dir, system_site_packages=True, with_pip=True)
    py = env_dir / "bin" / "python"
    r = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    user = work / "user"  # a folder of the user's, outside the checkout
    user.mkdir()
    env.update(EVO_CACHE_DIR=str(work / "cache"), PATH=f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}")

    def run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(env_dir / "bin" / "evo"), *args], cwd=user, env=env, capture_output=True, text=True, timeout=timeout
        )

    r = subprocess.run(
        [str(py), "-c", "import evo, harness, gates; print(evo.__file__, harness.__file__, gates.__file__)"],
        cwd=user,
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and all(p.startswith(str(env_dir)) for p in r.stdout.split()), r.stdout + r.stderr
    # harness and gates come from inside evo (evo/harness, evo/gates), never as top-level packages of their own
    assert [Path(p).parent.parent.name for p in r.stdout.split()[1:]] == ["evo", "evo"], r.stdout
    run.wheel = wheel  # type: ignore[attr-defined]
    return run, user, py, env


def test_the_wheel_installs_by_its_name_and_holds_no_top_level_harness_or_gates(installed):
    run, _, py, env = installed
    r = run("--version")
    assert r.returncode == 0 and r.stdout.strip() == "evo 0.1.0", r.stdout + r.stderr
    r = subprocess.run([str(py), "-m", "pip", "show", "-f", "evo-kernels"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    meta = dict(ln.split(": ", 1) for ln in r.stdout.split("Files:")[0].splitlines() if ": " in ln)
    assert meta["Name"] == "evo-kernels" and meta["Version"] == "0.1.0", meta
    files = [ln.strip() for ln in r.stdout.split("Files:")[1].splitlines() if ln.strip()]
    tops = {f.split("/")[0] for f in files}
    assert "harness" not in tops and "gates" not in tops, sorted(tops)
    assert any(f.startswith("evo/harness/nvrtc_std/") for f in files) and "evo/gates/perf.py" in files
    r = subprocess.run(
        [
            str(py),
            "-c",
            "import importlib.metadata as m; d = m.metadata('evo-kernels'); "
            "print(d['License-Expression'], len(d.get_all('Classifier')), d['Keywords'])",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    lic, n_classifiers, keywords = r.stdout.split()
    assert lic == "Apache-2.0" and int(n_classifiers) >= 5 and "cuda" in keywords, r.stdout + r.stderr


def test_the_wheel_lists_the_shipped_families_from_any_folder(installed):
    run, _, _, _ = installed
    r = run("families")
    assert r.returncode == 0, r.stdout + r.stderr
    for name in ("fp4_matvec", "mhc_pre_big_fuse", "mhc_prenorm_gemm", "moe_q2_matvec"):
        line = next(ln for ln in r.stdout.splitlines() if ln.startswith(f"{name}: "))
        assert "[shipped: " in line and "site-packages" in line, line


def test_the_wheel_runs_a_shipped_campaign_on_recorded_data(installed):
    run, user, _, _ = installed
    r = run("run", "mhc_pre_big_fuse", "--backend", "recorded", "--attempts", "12", "--plain")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "simulated from recorded H200 measurements" in r.stdout
    assert (user / "logs" / "mhc_pre_big_fuse" / "ledger.db").is_file()  # under the user's folder, not the package's
    r = run("status", "mhc_pre_big_fuse")
    assert r.returncode == 0 and "attempts: 12 recorded" in r.stdout, r.stdout  # the baseline is one of them


def test_the_wheel_checks_a_family_made_by_evo_new_and_the_example(installed):
    run, user, _, _ = installed
    r = run("new", "my_axpy")
    assert r.returncode == 0, r.stderr
    r = run("check", "my_axpy/evo.yaml", "--sample", "3", "--cpu")
    assert r.returncode == 0 and r.stdout.splitlines()[-1].startswith("evo check: pass"), r.stdout + r.stderr
    # the kernel as engines write it, <cstdint> included: NVRTC has none, the wheel's harness/nvrtc_std gives it
    kernel = user / "my_axpy" / "kernel.cu"
    text = kernel.read_text().replace("#include <cuda_bf16.h>", "#include <cstdint>\n#include <cuda_bf16.h>")
    kernel.write_text(text.replace("const int i = ", "const std::int64_t i = "))
    r = run("check", "my_axpy/evo.yaml", "--sample", "1", "--cpu")
    assert r.returncode == 0 and r.stdout.splitlines()[-1].startswith("evo check: pass"), r.stdout + r.stderr
    shutil.copytree(EXAMPLE, user / "rmsnorm")  # the example, as a user keeps it in their own repo
    r = run("check", "rmsnorm/evo.yaml", "--sample", "3", "--cpu")
    assert r.returncode == 0 and r.stdout.splitlines()[-1].startswith("evo check: pass"), r.stdout + r.stderr


# A header of a header-only kernel library as engines write them: host C++ beside the kernels.
HOST_LIBRARY = """\
#pragma once
#include <iostream>
#include <stdexcept>
#include <vector>

namespace mylib {
constexpr int lanes(int vec) { return 32 * vec; }  // host constexpr used in device code: --expt-relaxed-constexpr
inline void check_sizes(const std::vector<int>& sizes) {
  for (int s : sizes)
    if (s <= 0) throw std::invalid_argument("sizes must be positive");
  std::cout << sizes.size() << " sizes" << std::endl;
}
}  // namespace mylib
"""


@pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(), reason="no nvcc")
def test_the_wheel_compiles_a_host_cpp_library_with_nvcc_and_ships_the_torch_stand_ins(installed):
    import zipfile

    run, user, _, _ = installed
    names = zipfile.ZipFile(run.wheel).namelist()
    assert "evo/harness/torch_shim/c10/cuda/impl/cuda_cmake_macros.h" in names and "evo/harness/nvcc.py" in names
    r = run("new", "host_lib")
    assert r.returncode == 0, r.stderr
    fam = user / "host_lib"
    (fam / "mylib").mkdir()
    (fam / "mylib" / "host.cuh").write_text(HOST_LIBRARY)
    kernel = (
        (fam / "kernel.cu")
        .read_text()
        .replace("#include <cuda_bf16.h>", '#include <cuda_bf16.h>\n#include "mylib/host.cuh"')
    )
    (fam / "kernel.cu").write_text(
        kernel.replace("if (i >= n) return;", "if (i >= n || mylib::lanes(VEC) < 0) return;")
    )
    with (fam / "evo.yaml").open("a") as f:
        f.write("build: {compile_options: [--expt-relaxed-constexpr]}\n")
    r = run("check", "host_lib/evo.yaml", "--sample", "2", "--cpu")
    assert r.returncode == 0 and r.stdout.splitlines()[-1].startswith("evo check: pass"), r.stdout + r.stderr
    assert "compiler: nvcc (auto: NVRTC cannot compile the kernel as written" in r.stdout, r.stdout
    assert "(sm_90, nvcc)" in r.stdout or ", nvcc):" in r.stdout, r.stdout
