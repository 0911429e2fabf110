"""Worker isolation: a crash, a dying process or a hang ends only the worker; the campaign goes on."""

from __future__ import annotations

from pathlib import Path

from evo.config import load_config
from evo.core.records import Code
from evo.loop.campaign import Campaign
from harness.worker import WorkerBackend

ROOT = Path(__file__).resolve().parent.parent


def _cfg(tmp_path: Path, attempts: int) -> Path:
    text = (ROOT / "configs/mhc_pre_big_fuse.yaml").read_text().replace("backend: auto", "backend: recorded")
    text = text.replace("budget: {attempts: 150, minutes: 8}", f"budget: {{attempts: {attempts}}}")
    text = text.replace("worker: {timeout_s: 30}", "worker: {isolation: worker, timeout_s: 3}")  # a key once only
    text += f"\nstorage: sqlite:///{tmp_path}/ledger.db\n"
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


def _run(cfg, wb: WorkerBackend):
    """The campaign to its budget on the worker; its attempts (the worker closed whatever happened)."""
    try:
        camp = Campaign(cfg, out=lambda s: None, backend=wb)
        camp.run()
        return camp.ledger.attempts()
    finally:
        wb.close()


def test_crash_death_and_hang_get_verdicts_and_the_campaign_goes_on(tmp_path):
    path = _cfg(tmp_path, 35)
    cfg = load_config(path)
    wb = WorkerBackend("fake_backend:faulty_backend", {"config": str(path), "backend": "recorded"}, timeout_s=3)
    atts = _run(cfg, wb)
    assert len(atts) == 35  # every attempt recorded, the budget reached
    by_kind = {}
    for a in atts:
        g = a.genome
        if a.verdict.status == "error":
            by_kind.setdefault(a.verdict.kind, []).append(a)
        if a.verdict.gate in ("static",) or a.verdict.code is Code.CORRECTNESS_INEXACT_KNOB:
            continue
        if g["unroll"] == 4 and a.verdict.status != "baseline":
            assert (a.verdict.status, a.verdict.kind) == ("error", "crash"), a.verdict
            assert "illegal memory access" in a.verdict.reason
        elif g["h_split"] == 8:
            assert (a.verdict.status, a.verdict.kind) == ("error", "crash"), a.verdict
            assert "died" in a.verdict.reason and "139" in a.verdict.reason
        elif g["vec"] == 8 and g["unroll"] == 2:
            assert (a.verdict.status, a.verdict.kind) == ("error", "timeout"), a.verdict
    assert by_kind.get("crash") and wb.restarts >= 1
    # After restarts the worker still judges ordinary genomes: some attempt after the first crash was measured.
    first = min(a.id for a in by_kind["crash"])
    assert any(a.id > first and a.timings for a in atts)


def test_a_segfault_in_the_workers_family_hook_names_the_hook_and_the_signal(tmp_path, capsys):
    """On the GPU backend the family's launch() runs in the worker: its segfault was "the worker died during
    correctness (signal 11)", naming neither the family nor the hook (tests/test_nothing_lost_round4.py's gpu case
    failed on an H100 for it); now as `evo run`'s watching parent says a crash of the campaign's own process."""
    path = _cfg(tmp_path, 6)
    cfg = load_config(path)
    mark = tmp_path / "crashed"
    wb = WorkerBackend("fake_backend:segfaulting_backend", {"config": str(path), "mark": str(mark)}, timeout_s=30)
    atts = _run(cfg, wb)
    assert mark.exists()
    crashed = [a for a in atts if a.verdict.kind == "crash"]
    assert len(crashed) == 1 and len(atts) == 6, [(a.id, a.verdict.reason) for a in atts]
    assert "family mhc_pre_big_fuse: launch() crashed (SIGSEGV)" in crashed[0].verdict.reason
    said = [ln for ln in capsys.readouterr().err.splitlines() if "SIGSEGV" in ln]
    assert len(said) == 1 and f"attempt #{crashed[0].id}" in said[0] and "launch()" in said[0], said
