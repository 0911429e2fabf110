"""Shipped campaigns on the recorded backend give the attempts, verdicts and champion pinned in
tests/data/recorded_verdicts.json, recorded on main before variants were (machine code, launch) (issue 40): no
shipped sweep links genomes whose launches differ, so the identity gate by (code, launch) must reject exactly the
genomes it rejected by machine code alone. mhc_pre_decode's first 40 attempts hold 10 of them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evo.config import load_config
from evo.core.records import Code
from evo.loop.campaign import Campaign

ROOT = Path(__file__).resolve().parent.parent
PINNED = json.loads((ROOT / "tests" / "data" / "recorded_verdicts.json").read_text())


def _config(tmp_path: Path, name: str, attempts: int) -> Path:
    """The shipped config with a budget of ``attempts``, the recorded backend, storage under tmp_path and the finish
    off."""
    text = (ROOT / "configs" / f"{name}.yaml").read_text()
    text = re.sub(r"^budget: .*$", f"budget: {{attempts: {attempts}}}", text, count=1, flags=re.M)
    text = re.sub(r"^backend: .*$", "backend: recorded", text, count=1, flags=re.M)
    text = re.sub(r"^storage: .*\n", "", text, flags=re.M) + f"storage: sqlite:///{tmp_path / 'c.db'}\n"
    # pinned before the finish (evo/loop/finish.py) existed: it would add its attempts near the budget's end
    text += "search: {finish: {enabled: false}}\n"
    p = tmp_path / "configs" / f"{name}.yaml"
    p.parent.mkdir(parents=True)
    p.write_text(text)
    return p


@pytest.mark.parametrize("name", sorted(PINNED))
def test_a_shipped_recorded_campaign_gives_the_pinned_verdicts(tmp_path, name):
    pinned = PINNED[name]
    camp = Campaign(load_config(_config(tmp_path, name, pinned["attempts"])), out=lambda s: None, command="pytest")
    summary = camp.run()
    atts = camp.ledger.attempts()
    got = [
        [
            a.genome_key,
            a.verdict.code.value,
            a.verdict.detail.get("attempt") if a.verdict.code is Code.STATIC_IDENTICAL_SASS else None,
        ]
        for a in atts
    ]
    assert got == pinned["verdicts"]
    assert summary.champion is not None and summary.champion.id == pinned["champion"]
    assert all(a.launch_sha256 for a in atts if a.sass_sha256)  # recorded now, beside the machine code
