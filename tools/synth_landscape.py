"""Synthetic landscapes in the recorded-sweep format: seeded, on a real family's knob space, for tools/search_bench.py.

    python tools/synth_landscape.py --family fp4_matvec --kind needle --seed 0 --out /tmp/fp4-needle-0.json.xz
    python tools/search_bench.py --family fp4_matvec --sweep /tmp/fp4-needle-0.json.xz --seeds 10

A landscape keeps the family's knobs, its constraints (``family.check`` on the sweep's geometries), its baseline and
the header of its recorded sweep (geometries, correctness evidence: every valid synthetic genome carries the
baseline's own checks, so it passes the correctness gate of either mode; in exact mode a genome with an
order-changing knob stays invalid, as the bench rules it). Only the times are made up: log speed relative to the
baseline is

* one effect per knob value (each knob's importance log-normal, numeric knobs with a smooth optimum along their
  ordered values plus noise), plus
* two-knob interactions on a share of the knob pairs and a few three-knob terms, and, by ``kind``:

  - ``interactions``: strong pair and triple terms (about as large as the one-knob effects);
  - ``needle``: one random valid genome far from the baseline is lifted 8-15% above every other genome, its
    neighbours not at all (nothing but luck or exhaustive search finds it);
  - ``plateau``: speed saturates (a roofline: min(f, cap)) and is rounded to 2% steps, so many genomes tie near
    the top and the slope says little there;
  - ``invalid``: a few value pairs (and every genome holding one) crash, a fifth to a half of the space, the best
    regions bordering them.

Every landscape has some invalid value pairs (0.5% of pairs at least). Every genome gets its own SASS digest.
The same family, kind and seed give the same file content (but for ``created``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import itertools
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evo.core.family import Geometry, load_family  # noqa: E402
from evo.core.genome import Genome  # noqa: E402
from harness import sweepfile  # noqa: E402
from harness.sweepfile import sweep_files  # noqa: E402
from tools.bench_peers import ordered_values  # noqa: E402

KINDS = ("interactions", "needle", "plateau", "invalid")


def _seed(family: str, kind: str, seed: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{family}/{kind}/{seed}".encode()).digest()[:8], "little")


def landscape(family_name: str, kind: str, seed: int, template: dict[str, Any] | None = None) -> dict[str, Any]:
    """A synthetic sweep (the dict harness.sweepfile.save writes) of ``kind`` on the family's knob space."""
    if kind not in KINDS:
        raise ValueError(f"kind: one of {', '.join(KINDS)}, not {kind!r}")
    family = load_family(family_name)
    if template is None:
        paths = sweep_files(family.folder / "recorded")
        if not paths:
            raise SystemExit(f"family {family_name} has no recorded sweep to take the header from")
        template = sweepfile.load(paths[0])
    rng = np.random.default_rng(_seed(family_name, kind, seed))
    geos = [Geometry(g["name"], dict(g["params"]), float(g["weight"])) for g in template["geometries"]]
    knobs = list(family.knobs)
    names = [k.name for k in knobs]
    codes = []
    for vals in itertools.product(*(range(len(k.values)) for k in knobs)):
        g = Genome({n: knobs[i].values[v] for i, (n, v) in enumerate(zip(names, vals))})
        if family.check(g, geos) is None:
            codes.append(vals)
    C = np.array(codes, dtype=np.int64)
    base_g = family.baseline()
    base = np.array([list(k.values).index(base_g[k.name]) for k in knobs])
    nk = len(knobs)
    strong = kind == "interactions"

    # one-knob effects: importance per knob (log-normal), numeric knobs with a smooth optimum along their order
    f = np.zeros(len(C))
    for i, k in enumerate(knobs):
        n = len(k.values)
        if n < 2:
            continue
        imp = 0.06 * math.exp(rng.normal(0.0, 0.8))
        if ordered_values(k.values) is not None:
            rank = np.argsort(np.argsort(np.array(k.values, dtype=float))) / (n - 1)
            opt = rng.uniform(0, 1)
            eff = -imp * 2.0 * (rank - opt) ** 2 + 0.3 * imp * rng.normal(size=n)
        else:
            eff = imp * rng.normal(size=n)
        f += eff[C[:, i]]
    # interactions: a share of the knob pairs, a few triples
    pairs = list(itertools.combinations(range(nk), 2))
    share, size = (0.6, 0.06) if strong else (0.3, 0.025)
    for i, j in pairs:
        if rng.random() < share:
            table = size * math.exp(rng.normal(0, 0.5)) * rng.normal(size=(len(knobs[i].values), len(knobs[j].values)))
            f += table[C[:, i], C[:, j]]
    for _ in range(4 if strong else 1):
        i, j, m = rng.choice(nk, 3, replace=False)
        table = (0.05 if strong else 0.02) * rng.normal(
            size=(len(knobs[i].values), len(knobs[j].values), len(knobs[m].values))
        )
        f += table[C[:, i], C[:, j], C[:, m]]
    # invalid value pairs (crashes)
    invalid = np.zeros(len(C), dtype=bool)
    n_bad = max(1, int(0.005 * sum(len(knobs[i].values) * len(knobs[j].values) for i, j in pairs)))
    want = rng.uniform(0.2, 0.5) if kind == "invalid" else 0.0
    tries = 0
    while (n_bad > 0 or invalid.mean() < want) and tries < 500:
        tries += 1
        i, j = rng.choice(nk, 2, replace=False)
        vi, vj = rng.integers(len(knobs[i].values)), rng.integers(len(knobs[j].values))
        if vi == base[i] and vj == base[j]:
            continue
        hit = (C[:, i] == vi) & (C[:, j] == vj)
        if kind == "invalid" and invalid.mean() < want:  # border the best region: prefer pairs that hold fast genomes
            if hit.any() and f[hit].mean() < np.median(f):
                continue
        invalid |= hit
        n_bad -= 1
    is_base = (C == base).all(axis=1)
    invalid &= ~is_base
    f -= f[is_base][0]
    if kind == "plateau":
        cap = np.quantile(f[~invalid], 0.9)
        f = np.minimum(f, cap)
        f = np.round(f / 0.02) * 0.02
        f -= f[is_base][0]
    if kind == "needle":
        far = (C != base).sum(axis=1) >= max(2, nk // 2)
        pool = (
            np.flatnonzero(~invalid & far & ~is_base)
            if (~invalid & far & ~is_base).any()
            else np.flatnonzero(~invalid & ~is_base)
        )
        j = int(rng.choice(pool))
        f[j] = float(f[~invalid].max()) + math.log(rng.uniform(1.08, 1.15))

    out = {k: v for k, v in template.items() if k != "genomes"}
    out["created"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    out["command"] = f"tools/synth_landscape.py --family {family_name} --kind {kind} --seed {seed}"
    out["synthetic"] = {"family": family_name, "kind": kind, "seed": seed}
    bkey = template["baseline_key"]
    bentry = sweepfile.linked_entry(template["genomes"], bkey)  # (the links followed as every sweep reader does)
    if bentry is None:
        raise ValueError(f"the template's baseline {bkey} has no data within {sweepfile.SAME_AS_HOPS} same_as links")
    weighted = [g.name for g in geos if g.weight > 0]
    bt = {n: float(np.median(bentry["t"][n])) for n in weighted}
    genomes: dict[str, Any] = {}
    for c, fv, bad in zip(C, f, invalid):
        g = Genome({n: knobs[i].values[int(v)] for i, (n, v) in enumerate(zip(names, c))})
        e: dict[str, Any] = {"sass": hashlib.sha256(f"synthetic/{g.key}".encode()).hexdigest()}
        if bad:
            e.update(status="crash", checks=[], t={})
        else:
            e.update(
                status="ok",
                checks=bentry["checks"],
                t={n: [round(bt[n] / math.exp(float(fv)), 6)] * 3 for n in weighted},
                b={n: [bt[n]] * 3 for n in weighted},  # the baseline's interleaved times (no drift)
            )
        genomes[g.key] = e
    out["genomes"] = genomes
    out["baseline_key"] = family.baseline().key
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", required=True)
    ap.add_argument("--kind", choices=KINDS, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="the sweep file to write (.json.xz)")
    args = ap.parse_args(argv)
    data = landscape(args.family, args.kind, args.seed)
    path = sweepfile.save(args.out, data)
    valid = sum(1 for e in data["genomes"].values() if e["status"] == "ok")
    print(f"wrote {path}: {len(data['genomes'])} genomes, {valid} valid ({args.kind}, seed {args.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
