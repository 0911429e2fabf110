"""Attempts per hour of the campaigns in logs/<name>/ledger.db, as tools/h200/session4-c.sh and -d.sh print them.

    python3 tools/h200/throughput.py mhc_pre_1w mhc_pre_2w
    python3 tools/h200/throughput.py logs/h200/2026-11-30-session4/d/mhc_pre_1w   # a committed (gzipped) ledger

A name with a slash is a folder holding ledger.db or ledger.db.gz (committed ledgers are gzipped).

Counted from the first to the last attempt of the measuring loop (the baseline and the set-up excluded), with
the workers that made them, the median cycle and the interrupted ones.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
import statistics
import sys
import tempfile
from datetime import datetime
from pathlib import Path


def _connect(name: str) -> sqlite3.Connection:
    folder = Path(name) if "/" in name else Path("logs") / name
    if (folder / "ledger.db").is_file():
        return sqlite3.connect(folder / "ledger.db")
    tmp = tempfile.NamedTemporaryFile(suffix=".db", delete=False)
    with gzip.open(folder / "ledger.db.gz") as src, tmp:
        shutil.copyfileobj(src, tmp)
    return sqlite3.connect(tmp.name)


def main(names: list[str]) -> int:
    for name in names:
        con = _connect(name)
        rows = con.execute("select t.datetime_start, t.datetime_complete, a.value_json from trials t join "
                           "trial_user_attributes a on a.trial_id = t.trial_id where a.key = 'attempt' "
                           "order by t.number").fetchall()
        atts = [(datetime.fromisoformat(s), datetime.fromisoformat(c), json.loads(json.loads(v))) for s, c, v in rows]
        loop = [x for x in atts if x[2]["verdict"]["status"] != "baseline"]
        span = (max(c for _, c, _ in loop) - min(s for s, _, _ in loop)).total_seconds()
        workers = {x[2].get("device", {}).get("worker", "-") for x in loop}
        cyc = [x[2]["cycle_s"] for x in loop if x[2].get("cycle_s")]
        interrupted = sum(x[2]["verdict"].get("kind") == "interrupted" for x in loop)
        print(f"{name}: {len(loop)} attempts by {len(workers)} worker(s) in {span:.1f} s = "
              f"{3600 * len(loop) / span:.0f} per hour; median cycle {statistics.median(cyc):.3f} s; "
              f"interrupted {interrupted}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
