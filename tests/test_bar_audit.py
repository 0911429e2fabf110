"""tools/bar_audit_score.py (session 31, issue 42: is the bar attainable?): each peer in evo's place, compared with
the best of the *other* peers chosen on the selection seeds only; hand-computed on a tiny synthetic runs dict."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest

from tools import bar_audit as ba
from tools import bar_audit_score as bs

CAP = 150
SEL = (1000, 1001)
TEST = [0, 1]


def _runs(name: str, seeds: tuple[int, ...] | list[int], to: list[int | None]) -> list[dict[str, Any]]:
    """Runs of ``name``: evaluations to 2% per seed (None: never; the run then made the cap)."""
    return [
        {"strategy": name, "seed": s, "to": {"0.01": None, "0.02": t, "0.05": t}, "made": CAP if t is None else t}
        for s, t in zip(seeds, to, strict=True)
    ]


def _landscape(sel: dict[str, list[int | None]], test: dict[str, list[int | None]], best: str) -> dict[str, Any]:
    return {
        "sweep": "/nowhere/x.json.gz",
        "best": 1.0,
        "best_peer": best,
        "runs": {
            "selection": {k: _runs(k, SEL, v) for k, v in sel.items()},
            "test": {k: _runs(k, TEST, v) for k, v in test.items()},
        },
    }


# On the selection seeds A is best (ERT 10), B second (20), C worst (100); on the test seeds the order is reversed
# (C 5, B 20, A 40): a choice made on the test seeds would pick C, a choice that is not leave-one-out would compare
# A with itself.
SELECTION = {"A": [10, 10], "B": [20, 20], "C": [100, 100]}


def _doc() -> dict[str, Any]:
    return {
        "L1": _landscape(SELECTION, {"A": [40, 40], "B": [20, 20], "C": [5, 5], "evo lag 1": [10, 10]}, "A"),
        # A and C never reach 2% on the test seeds (inf), nor does evo; B does
        "L2": _landscape(SELECTION, {"A": [None] * 2, "B": [30, 30], "C": [None] * 2, "evo lag 1": [None] * 2}, "A"),
    }


def _by(rows: list[bs.Row]) -> dict[str, bs.Row]:
    return {r.candidate: r for r in rows}


def test_each_candidate_is_compared_with_the_best_of_the_others_on_the_selection_seeds():
    rows = _by(bs.audit(_doc(), TEST, CAP))
    # leave-one-out: A's peer is B (not A itself, not C that wins only on the test seeds); the others' peer is A
    assert [c.peer for c in rows["A"].cells] == ["B", "B"]
    assert [c.peer for c in rows["B"].cells] == ["A", "A"]
    assert [c.peer for c in rows["C"].cells] == ["A", "A"]
    assert [c.peer for c in rows["evo lag 1"].cells] == ["A", "A"]  # evo's: the best of all the peers
    assert [c.ratio for c in rows["A"].cells] == [2.0, math.inf]  # 40 / 20; never reached, B did
    assert [c.ratio for c in rows["B"].cells] == [0.5, 0.0]  # 20 / 40; B reached, A never did
    assert [c.ratio for c in rows["C"].cells] == [0.125, 1.0]  # 5 / 40; neither reached: no evidence, 1
    assert [c.ratio for c in rows["evo lag 1"].cells] == [0.25, 1.0]


def test_the_bar_numbers_count_worse_and_infinite_landscapes():
    rows = _by(bs.audit(_doc(), TEST, CAP))
    a, c, evo = rows["A"], rows["C"], rows["evo lag 1"]
    assert math.isinf(a.geomean) and a.worse == 2 and a.infinite == 1 and not a.met
    assert c.geomean == pytest.approx(math.sqrt(0.125)) and c.worse == 0 and c.infinite == 0
    assert evo.geomean == pytest.approx(0.5) and evo.worse == 0
    assert rows["B"].geomean == 0.0  # a zero ratio (the peer never reached it) makes the geometric mean 0


def test_only_the_test_seeds_asked_for_count_and_a_missing_one_is_an_error():
    doc = _doc()
    doc["L1"]["runs"]["test"]["A"] += _runs("A", [2], [1])  # a third test seed, not asked for: ignored
    assert _by(bs.audit(doc, TEST, CAP))["A"].cells[0].ratio == 2.0
    with pytest.raises(bs.ScoreError, match="no run on seeds \\[2\\]"):
        bs.audit(doc, [0, 1, 2], CAP)


def test_selection_runs_on_a_test_seed_are_refused():
    doc = _doc()
    doc["L1"]["runs"]["selection"]["B"] += _runs("B", [0], [1])
    with pytest.raises(bs.ScoreError, match="used test seeds \\[0\\]"):
        bs.audit(doc, TEST, CAP)


def test_evo_peer_must_be_the_committed_choice():
    doc = _doc()
    doc["L2"]["best_peer"] = "B"
    with pytest.raises(bs.ScoreError, match="L2: best peer A is not the committed run's"):
        bs.audit(doc, TEST, CAP)


def test_a_run_past_the_cap_is_a_failure():
    doc = _doc()
    doc["L1"]["runs"]["test"]["B"] = _runs("B", TEST, [20, 200])  # 200 > cap: a failure that used 150
    cell = _by(bs.audit(doc, TEST, CAP))["A"].cells[0]
    assert cell.peer_ert == (20 + 150) / 1 and cell.ratio == pytest.approx(40 / 170)


def test_merge_joins_test_rows_and_refuses_a_seed_that_ran_differently(tmp_path: Path):
    committed = _doc()
    extra = {"L1": {"sweep": "/nowhere/x.json.gz", "best": 1.0, "runs": {"test": {"D": _runs("D", TEST, [3, 3])}}}}
    merged = bs.merge([committed, extra])
    assert merged["L1"]["runs"]["test"]["D"][0]["to"]["0.02"] == 3 and merged["L1"]["best_peer"] == "A"
    again = {"L1": {"sweep": "x", "best": 1.0, "runs": {"test": {"B": _runs("B", TEST, [20, 21])}}}}
    with pytest.raises(bs.ScoreError, match="B seed 1 ran twice"):
        bs.merge([committed, again])
    p = tmp_path / "runs.json.gz"
    with gzip.open(p, "wt") as f:
        json.dump(committed, f)
    assert bs.merge([bs.load(q) for q in bs.expand([str(tmp_path)])]) == bs.merge([committed])


def test_the_third_list_is_never_opened(capsys: pytest.CaptureFixture[str]):
    assert ba.main(["audit", "--from", "/work/ext/ktcaches/sel3/x.json.gz"]) == 2
    assert "stays unseen" in capsys.readouterr().err


def test_the_report_names_who_meets_each_clause():
    doc = _doc()
    text = "\n".join(bs.report(bs.audit(doc, TEST, CAP), doc, TEST, CAP))
    assert "- no landscape worse than 1.25x: B, C, evo lag 1" in text
    assert "| A | 2.00* | inf* |" in text  # A is the best on the selection seeds: compared with the second best
    assert "- L1: A 40.00" in text


def test_the_both_reached_column_leaves_out_zero_and_infinite_ratios():
    doc = _doc()
    rows = bs.audit(doc, TEST, CAP)
    lines = bs.report(rows, doc, TEST, CAP)
    b = next(x for x in lines if x.startswith("| B |"))
    assert "| 0.00 |" in b and b.endswith("| 0.50 (1) | met |")  # B: 0.5 and 0 (A never reached): 0.5 alone
    assert any("B (a ratio of 0" in x for x in lines)


def test_self_split_compares_a_strategy_with_itself_on_other_seeds():
    doc = _doc()
    for d in doc.values():  # 20 test seeds of the committed best peer A: 10 on seeds 0..9, 20 on 10..19 (L1)
        d["runs"]["test"]["A"] = _runs("A", list(range(20)), [10] * 10 + [20] * 10)
    doc["L2"]["runs"]["test"]["A"] = _runs("A", list(range(20)), [None] * 10 + [30] * 10)
    assert bs.self_split(doc, None, CAP, range(10), range(10, 20)) == [0.5, math.inf]
    (line,) = bs.noise_lines(doc, CAP, "evo lag 1")  # (evo's row has no 20 seeds here: no line for it)
    assert "worse than 1.25x on 1/2 landscapes (the other way round: 1/2)" in line
