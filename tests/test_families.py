"""Every family under candidates/ through the one Family interface, needing nothing outside its folder (a variant,
such as mhc_pre_decode, nothing outside its own and the shipped family it extends)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from evo.config import load_config
from evo.core.family import CANDIDATES_DIR, Family, family_names, load_family
from harness.build import Builder

ROOT = Path(__file__).resolve().parent.parent
FAMILIES = family_names()
ALLOWED_IMPORTS = {"evo", "torch", "__future__"} | set(sys.stdlib_module_names)
# The public paths families import (evo/family.py, genome.py, records.py re-export evo.core's modules).
CORE = {"evo.family", "evo.genome", "evo.records"}


def test_the_four_shipped_families_are_found():
    assert {"mhc_pre_big_fuse", "mhc_prenorm_gemm", "moe_q2_matvec", "fp4_matvec"} <= set(FAMILIES)


@pytest.mark.parametrize("name", FAMILIES)
def test_family_needs_nothing_outside_its_folder(name):
    folder = CANDIDATES_DIR / name
    tree = ast.parse((folder / "family.py").read_text())
    for node in ast.walk(tree):
        mods = []
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mods = [node.module or ""] if node.level == 0 else []
            assert node.level == 0, f"{name}: relative import"
        for m in mods:
            assert m.split(".")[0] in ALLOWED_IMPORTS, f"{name}/family.py imports {m}"
            if m.split(".")[0] == "evo":  # a family sees the core types only (pyproject's import contracts)
                assert m in CORE, f"{name}/family.py imports {m}, not one of the core modules {sorted(CORE)}"
    kernel = load_family(name).kernel_path
    if kernel.parent != folder:  # a variant (mhc_pre_decode): another shipped family's kernel, never anything else
        assert kernel.parent.parent == CANDIDATES_DIR and kernel.parent.name in FAMILIES, kernel
        assert kernel.parent.name in (folder / "family.py").read_text(), "a variant names the family it extends"
    assert "#include" not in kernel.read_text(), "kernels stay header-free (NVRTC on any machine)"


@pytest.mark.parametrize("name", FAMILIES)
def test_family_interface_and_config(name):
    fam = load_family(name)
    assert isinstance(fam, Family) and fam.name == name and fam.knobs and fam.entry
    cfg = load_config(ROOT / "configs" / f"{name}.yaml")
    assert cfg.family.name == name
    base = fam.baseline()
    assert fam.check(base, cfg.geometries) is None, "the baseline must be valid for its own config"
    for k in fam.knobs:
        assert k.default in k.values and isinstance(k.exact, bool) and k.doc
    for g in cfg.geometries:
        assert fam.outputs(g) and fam.bytes_moved(g) > 0
        lc = fam.launch(base, g)
        assert all(x >= 1 for x in lc.grid + lc.block)
        assert len(fam.arg_types()) > 0
    for title in fam.faults:
        assert fam.faulty_source(title) != fam.source()


@pytest.mark.parametrize("name", FAMILIES)
def test_baseline_compiles_without_spills(name, tmp_path):
    fam = load_family(name)
    cfg = load_config(ROOT / "configs" / f"{name}.yaml")
    built = Builder(fam, cfg.geometries, "sm_90").build(fam.baseline())
    for spec, m in built.modules.items():
        assert m.resources.registers > 0 and m.resources.spills == 0, (spec, m.resources)


@pytest.mark.parametrize("name", sorted(CORE))
def test_the_public_family_api_is_the_core_modules_names(name):
    """evo.family, evo.genome and evo.records re-export every public name of evo.core's module, the same objects."""
    import importlib

    public, core = importlib.import_module(name), importlib.import_module(name.replace("evo.", "evo.core.", 1))
    defined = {
        k
        for k, v in vars(core).items()
        if not k.startswith("_") and getattr(v, "__module__", core.__name__) == core.__name__
    }
    defined -= {k for k, v in vars(core).items() if isinstance(v, type(importlib))}  # modules it imports
    assert defined <= set(public.__all__), sorted(defined - set(public.__all__))
    assert all(getattr(public, k) is getattr(core, k) for k in public.__all__)
