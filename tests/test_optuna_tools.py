"""Issue 43 item 2: a ledger read by Optuna's own tools (optuna-dashboard, ``trials_dataframe()``) shows more
than one long JSON string: a named objective, the verdict's code and reason, the score as measured (never the
clamped value Optuna ranks by) and the speedup at each geometry by name."""

from __future__ import annotations

import math
from pathlib import Path

import optuna

from evo.config import load_config
from evo.ledger.dashboard import METRIC
from evo.loop.campaign import Campaign
from tests.test_views import _config


def test_optuna_public_api_reads_named_metrics_scores_and_geometries(tmp_path: Path):
    """Before: "Objective 0", per-geometry results as unnamed steps 0/1/2, the verdict only inside the attempt
    JSON, and a rejected attempt faster than the champion only as its clamped value."""
    cfg = load_config(_config(tmp_path, "mhc_pre_big_fuse", 12))
    camp = Campaign(cfg, out=lambda s: None)
    camp.run()
    atts = {a.id: a for a in camp.ledger.attempts()}
    study = optuna.load_study(study_name=cfg.campaign, storage=cfg.storage)  # public API only
    assert study.metric_names == [METRIC]
    df = study.trials_dataframe()
    assert len(df) == len(atts)
    geos = [g.name for g in cfg.geometries]
    for col in ["user_attrs_verdict_code", "user_attrs_reason", "user_attrs_score"] + [
        f"user_attrs_speedup.{g}" for g in geos
    ]:
        assert col in df.columns, sorted(df.columns)
    measured = 0
    for _, row in df.iterrows():
        a = atts[int(row["number"])]
        assert row["user_attrs_verdict_code"] == a.verdict.code.value
        assert row["user_attrs_reason"] and len(row["user_attrs_reason"]) <= 200
        if a.score is not None and math.isfinite(a.score):
            measured += 1
            assert row["user_attrs_score"] == a.score  # as measured, whatever value Optuna ranks by
        for g in geos:
            iv = a.speedup_vs_baseline.get(g)
            if iv is not None:
                assert row[f"user_attrs_speedup.{g}"] == iv.value
    assert measured >= len(atts) // 2
