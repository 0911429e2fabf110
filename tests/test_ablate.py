"""evo ablate: the champion against each of its changes set back alone, side by side; the table, the ledger meta,
the log's section and the commit messages that quote it (recorded backend: no GPU needed)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from evo.cli import main
from evo.ledger.ledger import Ledger
from evo.report import ablation as ab

ROOT = Path(__file__).resolve().parent.parent


def _config(tmp_path: Path, attempts: int) -> Path:
    text = (ROOT / "configs" / "mhc_pre_big_fuse.yaml").read_text()
    text = re.sub(r"^budget: .*$", f"budget: {{attempts: {attempts}}}", text, flags=re.M)
    text = re.sub(r"^backend: .*$", "backend: recorded", text, flags=re.M)
    p = tmp_path / "c.yaml"
    p.write_text(text + f"storage: sqlite:///{tmp_path / 'ledger.db'}\n")  # the log goes beside it
    return p


def _ledger(cfg: Path) -> Ledger:
    from evo.config import load_config

    c = load_config(cfg)
    return Ledger(c.storage, c.campaign, c.family.knobs)


def test_changes_and_their_ablations():
    base = {"block": 256, "vec": 16, "meta": "array"}
    champ = {"block": 128, "vec": 16, "meta": "slice", "idea:fold": True}
    assert ab.changes(base, champ) == ["block", "meta", "idea:fold"]  # knobs first, then ideas
    assert ab.describe_change("meta", base, champ) == "meta array->slice"
    assert ab.describe_change("idea:fold", base, champ) == "idea fold"
    assert dict(ab.without(champ, base, "block")) == {"block": 256, "vec": 16, "meta": "slice", "idea:fold": True}
    assert "idea:fold" not in dict(ab.without(champ, base, "idea:fold"))  # an idea set back is switched off
    assert ab.share(2.0, 2.0) == pytest.approx(1.0)
    assert ab.share(math.sqrt(2.0), 2.0) == pytest.approx(0.5)
    assert ab.share(1.2, 1.0) is None  # no gain to share


def test_ablate_a_recorded_campaign(tmp_path, capsys):
    cfg = _config(tmp_path, 25)
    assert main(["run", str(cfg), "--plain"]) == 0
    led = _ledger(cfg)
    before = len(led.attempts())
    champ = led.champion()
    base = next(a for a in led.attempts() if a.verdict.status == "baseline")
    assert champ.id != base.id
    capsys.readouterr()
    assert main(["ablate", str(cfg), "--rounds", "8"]) == 0
    out = capsys.readouterr().out
    led = _ledger(cfg)
    assert len(led.attempts()) == before  # measured beside the campaign, never one of its attempts
    rec = ab.latest(led.all_meta(), champ.id)
    keys = ab.changes(base.genome, champ.genome)
    assert rec and [e["key"] for e in rec["changes"]] == keys and rec["simulated"] is True
    for row in rec["geometries"].values():
        assert set(row["changes"]) == {e["key"] for e in rec["changes"] if "error" not in e}
        tot = row["total"]["value"]
        for r in row["changes"].values():
            assert r["share"] == pytest.approx(math.log(r["gain"]["value"]) / math.log(tot))
            assert r["gain"]["lo"] <= r["gain"]["value"] <= r["gain"]["hi"]
    # the printed table: one row per change at every geometry, and the total
    first = next(iter(rec["geometries"]))
    assert f"{first}: champion " in out and "| change set back alone |" in out
    for e in rec["changes"]:
        assert out.count(f"| {e['change']} |") == len(rec["geometries"])
    # the log gets the section; the export's commit messages quote the changes they hold
    md = (tmp_path / "attempts.md").read_text()
    assert "## Ablation" in md and f"Champion #{champ.id} with each of its changes" in md
    assert main(["export", str(cfg), "-o", str(tmp_path / "export")]) == 0
    msgs = "".join(p.read_text() for p in sorted((tmp_path / "export").glob("*.patch")))
    assert f"Which changes carry the gain (evo ablate of champion #{champ.id}" in " ".join(msgs.split())
    flat = " ".join(msgs.split())
    assert all(f"- {e['change']}, set back alone" in flat for e in rec["changes"] if "error" not in e)
    assert "on the recorded backend; simulated from recorded H200 measurements" in flat
    assert "Caveats: measured on NVIDIA H200 only" in msgs.replace("\n", " ")


def test_a_champion_not_ablated_says_how(tmp_path):
    cfg = _config(tmp_path, 25)
    assert main(["run", str(cfg), "--plain"]) == 0
    assert main(["export", str(cfg), "-o", str(tmp_path / "export")]) == 0
    msgs = " ".join("".join(p.read_text() for p in (tmp_path / "export").glob("*.patch")).split())
    assert "Which changes carry the gain: not measured for champion #" in msgs and "`evo ablate <config>`" in msgs
    md = (tmp_path / "attempts.md").read_text()
    assert "not ablated" in md


def test_nothing_to_ablate_is_one_line(tmp_path, capsys):
    cfg = _config(tmp_path, 1)
    assert main(["run", str(cfg), "--plain"]) == 0  # the baseline only
    capsys.readouterr()
    assert main(["ablate", str(cfg)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("evo: ") and "champion is the baseline" in err and "\n" not in err
    assert main(["ablate", str(tmp_path / "c.yaml"), "--rounds", "1"]) == 2
    assert "at least 3" in capsys.readouterr().err


def test_shares_need_a_total_gain_and_an_incomplete_table_says_so():
    rec = {
        "changes": [
            {"key": "a", "change": "a 1->2"},
            {"key": "b", "change": "b 1->2", "error": "incorrect without it"},
        ],
        "geometries": {
            "G": {
                "weight": 1,
                "champion_us": 10.0,
                "baseline_us": 20.0,
                "total": {"value": 2.0, "lo": 1.9, "hi": 2.1, "n": 12},
                "rounds": 12,
                "changes": {"a": {"us": 14.0, "gain": {"value": 1.4, "lo": 1.3, "hi": 1.5}, "share": 0.49}},
                "share_sum": None,
            },
            "W": {
                "weight": 0,
                "champion_us": 10.0,
                "baseline_us": 10.0,
                "total": {"value": 1.0, "lo": 0.99, "hi": 1.01, "n": 12},
                "rounds": 12,
                "changes": {"a": {"us": 9.0, "gain": {"value": 0.9, "lo": 0.89, "hi": 0.91}, "share": None}},
                "share_sum": None,
            },
        },
    }
    text = "\n".join(ab.table(rec))
    assert "– (1 change(s) not measured)" in text and "| b 1->2 | – | not measured: incorrect without it | – |" in text
    said = ab.carried(rec, ["a", "b"])
    assert said[0].startswith("a 1->2, set back alone") and "at G 1.400x [1.300, 1.500], 49%" in said[0]
    assert "at watched W the champion is faster without it (0.900x" in said[0]
    assert said[1] == "b 1->2: not measured (incorrect without it)"
