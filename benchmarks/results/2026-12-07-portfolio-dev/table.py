"""The table of docs/search-efficiency.md, "Portfolio (session 31)": per development landscape, the best peer's ERT
to within 2% (sel, sel2: the held-out runs' test part, 20 seeds; dev: the best of session 29's seven peers, seeds 0-3),
the shipped row's (seeds 0-3 of the committed runs: ../2026-12-07-failmodel-dev/main.json for dev, the held-out runs'
``evo lag 1`` test runs for sel and sel2) and each option column's (tools/evo_row.py JSON files, seeds 0-3).

    python benchmarks/results/2026-12-07-portfolio-dev/table.py portfolio3=p3.json ...
"""

from __future__ import annotations

import gzip
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from tools import search_metrics as sm  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = ROOT / "benchmarks" / "results"
CAP = 150


def peers() -> dict[str, tuple[str, float, str]]:
    """Landscape -> (best peer, its ERT2%, where it comes from)."""
    out: dict[str, tuple[str, float, str]] = {}
    for name in ("peers.json", "peers-easy.json"):
        for key, r in json.loads((RESULTS / "2026-12-07-explore-dev" / name).read_text()).items():
            land, peer = key.split(" | ")
            e = r["ert2"]
            if land not in out or e < out[land][1]:
                out[land] = (peer, e, "dev, 7 peers, 4 seeds")
    for part in ("2026-12-07-search-heldout", "2026-12-07-search-heldout-2"):
        data = json.load(gzip.open(RESULTS / part / "runs.json.gz"))
        for land, d in data.items():
            runs = d["runs"]["test"][d["best_peer"]]
            outs = [sm.outcome(r["to"]["0.02"], r["made"] - r.get("pre_gpu", 0), CAP) for r in runs]
            out[land] = (d["best_peer"], sm.ert(outs), f"held-out test, {len(runs)} seeds")
    return out


def shipped(seeds: int = 4) -> dict[str, dict]:
    """The shipped row on seeds 0..seeds-1, from the committed runs (the same code: every option off)."""
    main = json.loads((RESULTS / "2026-12-07-failmodel-dev" / "main.json").read_text())
    out = {land: {"ert2": r["ert"], "to2": r["to"]} for land, r in main.items()}  # (session 29's names)
    for part in ("2026-12-07-search-heldout", "2026-12-07-search-heldout-2"):
        data = json.load(gzip.open(RESULTS / part / "runs.json.gz"))
        for land, d in data.items():
            if land.startswith("gemm"):
                continue
            runs = sorted(d["runs"]["test"]["evo lag 1"], key=lambda r: r["seed"])[:seeds]
            outs = [sm.outcome(r["to"]["0.02"], r["made"] - r.get("pre_gpu", 0), CAP) for r in runs]
            out[land] = {"ert2": sm.ert(outs), "to2": [r["to"]["0.02"] for r in runs]}
    return out


def cell(r: dict) -> str:
    e, to = r["ert2"], r["to2"]
    n = sum(t is not None and t <= CAP for t in to)
    return f"{e:.1f}" if n == len(to) else (f"{e:.1f} ({n}/{len(to)})" if math.isfinite(e) else f"inf (0/{len(to)})")


def ratio(a: float, b: float) -> str:
    if math.isinf(a) and math.isinf(b):
        return "-"
    if math.isinf(b):
        return "finite (was inf)"
    return "inf" if math.isinf(a) else f"{a / b:.2f}"


def main(argv: list[str]) -> int:
    ship = shipped()
    cols = [(a.split("=")[0], json.loads(Path(a.split("=")[1]).read_text())) for a in argv]
    best = peers()
    head = ["landscape", "best peer", "its ERT2%", "shipped"]
    for name, _ in cols:
        head += [name, f"{name} / shipped", f"{name} / peer"]
    print("| " + " | ".join(head) + " |")
    print("|---|---|" + "---:|" * (len(head) - 2))
    for land in sorted(ship, key=lambda s: (s.split("_")[0], s)):
        s = ship[land]
        peer, pe, _ = best.get(land, ("?", math.inf, ""))
        row = [land, peer, f"{pe:.1f}", cell(s)]
        for _, col in cols:
            if land not in col:
                row += ["not run", "", ""]
                continue
            o = col[land]
            row += [cell(o), ratio(o["ert2"], s["ert2"]), ratio(o["ert2"], pe)]
        print("| " + " | ".join(row) + " |")
    for name, col in cols:
        print(summary(name, ship, col))
    return 0


def summary(name: str, ship: dict[str, dict], col: dict[str, dict]) -> str:
    """How a column compares with the shipped row: landscapes newly reached, lost, worse than 1.25x, and the
    geometric mean of the ratio where both are finite."""
    both = [land for land in col if math.isfinite(col[land]["ert2"]) and math.isfinite(ship[land]["ert2"])]
    gained = [land for land in col if math.isfinite(col[land]["ert2"]) and math.isinf(ship[land]["ert2"])]
    lost = [land for land in col if math.isinf(col[land]["ert2"]) and math.isfinite(ship[land]["ert2"])]
    worse = [land for land in both if col[land]["ert2"] > 1.25 * ship[land]["ert2"]]
    better = [land for land in both if col[land]["ert2"] < ship[land]["ert2"] / 1.25]
    gm = math.exp(sum(math.log(col[x]["ert2"] / ship[x]["ert2"]) for x in both) / len(both)) if both else math.nan
    return (
        f"- {name}: within 2% where the shipped row never was: {', '.join(gained) or 'none'}; never where it was: "
        f"{', '.join(lost) or 'none'}; better by more than 1.25x: {', '.join(better) or 'none'}; worse by more "
        f"than 1.25x: {', '.join(worse) or 'none'}; geometric mean of the ratio over the {len(both)} where both "
        f"are finite: {gm:.2f}"
    )


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
