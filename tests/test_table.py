"""evo table: CSV and parquet that pandas reads back, one row per attempt and geometry; read-only on the ledger."""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

import pandas as pd
import pytest

from evo.cli import main
from evo.config import load_config
from evo.core.records import Code
from evo.ledger.ledger import Ledger

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    home = tmp_path_factory.mktemp("table")
    text = (ROOT / "configs/mhc_pre_big_fuse.yaml").read_text().replace("backend: auto", "backend: recorded")
    text = re.sub(r"budget: \{[^}]*\}", "budget: {attempts: 15}", text)
    cfg = home / "c.yaml"
    cfg.write_text(text + f"\nstorage: sqlite:///{home}/ledger.db\n")
    assert main(["run", str(cfg), "--plain"]) == 0
    return cfg


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.mark.parametrize("name", ["attempts.csv", "attempts.parquet"])
def test_table_reads_back_one_row_per_attempt_and_geometry(campaign, tmp_path, capsys, name):
    db = campaign.parent / "ledger.db"
    before = _digest(db)
    out = tmp_path / name
    assert main(["table", str(campaign), "-o", str(out)]) == 0
    assert _digest(db) == before  # read-only, as evo status and evo log
    df = pd.read_csv(out) if name.endswith(".csv") else pd.read_parquet(out)
    cfg = load_config(campaign)
    atts = Ledger(cfg.storage, cfg.campaign, cfg.family.knobs, readonly=True).attempts()
    geoms = [g.name for g in cfg.geometries]
    assert len(df) == len(atts) * len(geoms) and f"{len(df)} row(s)" in capsys.readouterr().out
    assert sorted(zip(df["attempt"], df["geometry"])) == sorted((a.id, g) for a in atts for g in geoms)
    for col in [k.name for k in cfg.family.knobs] + [
        "verdict",
        "code",
        "reason",
        "us",
        "vs_baseline_lo",
        "vs_baseline_hi",
        "pct_of_ceiling",
        "registers",
        "spills",
        "worker",
        "backend",
        "optuna_state",
    ]:
        assert col in df.columns, col
    champ = next(a for a in reversed(atts) if a.verdict.status == "accepted")
    g = geoms[0]
    row = df[(df["attempt"] == champ.id) & (df["geometry"] == g)].iloc[0]
    assert row["us"] == pytest.approx(champ.timings[g].median_us)
    assert row["vs_baseline_lo"] == pytest.approx(champ.speedup_vs_baseline[g].lo)
    assert row["pct_of_ceiling"] == pytest.approx(champ.roofline_pct[g])
    assert row["code"] == Code.PERF_ACCEPTED.value and row["backend"] == "recorded"
    assert row["optuna_state"] == "COMPLETE"
    assert all(str(row[k.name]) == str(champ.genome[k.name]) for k in cfg.family.knobs)
    stopped = [a for a in atts if a.verdict.code is Code.PERF_EARLY_STOP]
    if stopped:  # not timed past the geometry it stopped at: empty cells there, never a number
        a = stopped[0]
        rest = df[(df["attempt"] == a.id) & ~df["geometry"].isin(list(a.timings))]
        assert rest["us"].isna().all() and set(df[df["attempt"] == a.id]["optuna_state"]) == {"PRUNED"}


def test_parquet_without_pyarrow_is_one_line_naming_the_extra(campaign, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    out = tmp_path / "a.parquet"
    assert main(["table", str(campaign), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pyarrow" in err and "evo-kernels[table]" in err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_other_names_and_no_ledger_are_refused(campaign, tmp_path, capsys):
    assert main(["table", str(campaign), "-o", str(tmp_path / "a.xlsx")]) == 2
    assert ".csv or .parquet" in capsys.readouterr().err
    other = tmp_path / "c.yaml"
    other.write_text(campaign.read_text().replace(str(campaign.parent), str(tmp_path)))
    assert main(["table", str(other), "-o", str(tmp_path / "a.csv")]) == 2
    assert "no ledger yet" in capsys.readouterr().err and not (tmp_path / "a.csv").exists()


def test_table_is_ready_for_analysis(campaign, tmp_path):
    """is_champion, the geometry's parameters as columns, the device, typed timestamps, the baseline at 1.0."""
    out = tmp_path / "attempts.parquet"
    assert main(["table", str(campaign), "-o", str(out)]) == 0
    df = pd.read_parquet(out)
    cfg = load_config(campaign)
    atts = Ledger(cfg.storage, cfg.campaign, cfg.family.knobs, readonly=True).attempts()
    champ = max(a.id for a in atts if a.verdict.status == "accepted")
    assert df["is_champion"].dtype == bool and set(df[df["is_champion"]]["attempt"]) == {champ}
    for g in cfg.geometries:  # T, H, ... of each geometry, one column each
        rows = df[df["geometry"] == g.name]
        for p, v in g.params.items():
            assert (rows[p] == v).all(), (g.name, p)
    assert set(df["device"]) == {"NVIDIA H200"}  # the recorded sweep's GPU, from the ledger meta
    assert str(df["started_at"].dtype).startswith("datetime64") and str(df["started_at"].dt.tz) == "UTC"
    base = df[df["verdict"] == "baseline"]
    assert (base["vs_baseline"] == 1.0).all() and (base["vs_baseline_lo"] == 1.0).all()
    assert (df.groupby("attempt")["finished_at"].first().diff().dropna() >= pd.Timedelta(0)).all()
