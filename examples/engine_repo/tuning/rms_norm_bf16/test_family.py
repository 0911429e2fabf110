"""Smoke test of the rms_norm_bf16 family (made by `evo new`): `python -m pytest test_family.py` runs `evo check`."""

from pathlib import Path

from evo.check import run_check


def test_evo_check_passes():
    ok, line = run_check(Path(__file__).resolve().parent / "evo.yaml", gpu=False, say=lambda s: None)
    assert ok, line
