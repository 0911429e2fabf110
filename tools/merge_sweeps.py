"""Join the shards of a sweep (``tools/sweep.py --shard I/N``) into one sweep file.

    python tools/merge_sweeps.py s1.json.xz s2.json.xz [...] --out candidates/<family>/recorded/h200-sweep.json.xz
    python tools/merge_sweeps.py s1.json.xz --out partial.json.xz --allow-partial   # shard 2/2 not there yet

The output has the format ``tools/sweep.py`` writes, so ``harness/recorded.py`` and ``tools/search_bench.py``
read it as they read an unsharded sweep. Refused, with a one-line error: files that are not shards of one sweep
(family, knob space and its seeded order, geometries, seed, seeds, runs, rounds, A/A rounds, batch length,
baseline genome, shard count or GPU model differ), the same genome in two files, a genome in the wrong shard,
and baselines whose outputs are not bitwise the same (every check stores "=" for "the baseline's hash of its own
run"). Without ``--allow-partial`` also a merge that does not hold every valid genome (a shard not given, or
stopped by its time limit or a crash); with it the file says so in ``stopped`` ("partial merge: ...") and lists
the missing genomes in ``merged.missing``.

**Baselines.** Each shard measured the baseline itself, and each genome's ``t`` (its per-round times) and ``b``
(the baseline's time next to it in each round) come from its own shard. The first shard given (the reference)
provides the baseline entry, the A/A pairs, device facts, copy ceiling and launch counts of the output; every
shard's own are kept in ``merged.shards``. The times of the other shards' genomes are multiplied, per geometry,
by ``scale = B_ref / B_shard``, where B is the median of the baseline entry's ``t`` in each file, and the factor is
recorded in ``merged.shards[i].scale``. Hence:

* ``tools/search_bench.py``'s objective, median(baseline t) / median(genome t), is for every genome what its own
  shard's file gives: the genome against the baseline measured in the same run;
* ``harness/recorded.py``'s drift correction t_i x B / b_i is unchanged, since t and b are scaled together.

A shard run on another GPU (or later) of the same model can run a few per cent faster or slower as a whole; the
scale takes that out, as far as the baseline's median captures it. Genomes of the same variant (machine code and
launch, evo/core/variant.py ``variant_key``; the SASS alone in shards from before launch digests) are measured once
in an unsharded sweep and stored as ``same_as`` the first one in the seeded order; across shards the same variant
may have been measured twice, so the merge keeps the measurement of the genome first in the seeded order and makes
the others ``same_as`` it. Where that happened, ``merged.identical_sass_measured_twice`` compares the two
measurements (scaled): a direct check of how well the scale carries one shard's times over to another's.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evo.core.variant import variant_key  # noqa: E402
from harness import sweepfile  # noqa: E402
from tools.sweep import in_shard  # noqa: E402

# Fields every shard of one sweep must agree on (a missing field counts as None, so older files compare too).
SAME = (
    "format",
    "family",
    "geometries",
    "seed",
    "seeds",
    "runs",
    "rounds",
    "aa_rounds",
    "batch_ms",
    "baseline_key",
    "launch",
)


class MergeError(ValueError):
    """The files cannot be merged (the message is one line)."""


def load(path: str | Path) -> dict[str, Any]:
    return sweepfile.load(path, check=False)


def _median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def _scaled(e: Mapping[str, Any], scale: Mapping[str, float] | None) -> dict[str, Any]:
    if scale is None or "t" not in e:
        return dict(e)
    out = dict(e)
    out["t"] = {n: [round(x * scale[n], 4) for x in v] for n, v in e["t"].items()}
    out["b"] = {n: [round(x * scale[n], 4) for x in v] for n, v in e["b"].items()}
    return out


def _shard(d: Mapping[str, Any], name: str) -> tuple[int, int]:
    if "merged" in d:
        raise MergeError(f"{name} is already a merge of shards; merge the shard files themselves")
    if not isinstance(d.get("shard"), Mapping) or not isinstance(d.get("space"), Mapping):
        raise MergeError(
            f"{name} is not a shard file of tools/sweep.py (no 'shard'/'space' entry: made before --shard existed?)"
        )
    return int(d["shard"]["index"]), int(d["shard"]["count"])


def _field(d: Mapping[str, Any], key: str) -> Any:
    """A field as the shards are compared on it: a sweep from before files said how they launched timed plainly."""
    return d.get(key) or "plain" if key == "launch" else d.get(key)


def _check_same(files: Sequence[tuple[str, dict[str, Any]]]) -> None:
    (name0, d0), rest = files[0], files[1:]
    for name, d in rest:
        for k in SAME:
            if _field(d, k) != _field(d0, k):
                shown = f" ({d0.get(k)!r} vs {d.get(k)!r})" if k != "geometries" else ""
                raise MergeError(f"{name} and {name0} are not shards of one sweep: {k} differs{shown}")
        if d["space"].get("knobs") != d0["space"].get("knobs"):
            raise MergeError(f"{name} and {name0} are not shards of one sweep: the knob space differs")
        if d["space"].get("order") != d0["space"].get("order"):
            raise MergeError(
                f"{name} and {name0} are not shards of one sweep: the valid genomes or their seeded "
                "order differ (family.check or the family's code changed?)"
            )
        gpu, gpu0 = (d.get("device") or {}).get("name"), (d0.get("device") or {}).get("name")
        if gpu != gpu0:
            raise MergeError(f"{name} and {name0} were measured on different GPU models ({gpu0} vs {gpu})")
        if d.get("baseline_hashes") != d0.get("baseline_hashes"):
            diff = sum(1 for k, v in d0.get("baseline_hashes", {}).items() if d.get("baseline_hashes", {}).get(k) != v)
            raise MergeError(
                f"the baseline's outputs differ between {name0} and {name} ({diff} of "
                f"{len(d0.get('baseline_hashes', {}))} hashes): their '=' checks mean different things"
            )


def resume(
    prev: tuple[str, dict[str, Any]], cont: tuple[str, dict[str, Any]], allow_partial: bool = True, command: str = ""
) -> dict[str, Any]:
    """A sweep stopped by its time limit (``prev``, unsharded) and its continuation (``tools/sweep.py --resume``:
    the baseline and the genomes ``prev`` lacks) as one sweep: the merge of two parts, ``prev`` the reference,
    the continuation's times scaled by its own baseline as a shard's are. ``prev`` may itself be such a merge (a
    sweep resumed or re-done before): it is taken as it stands, its own merge record kept as ``earlier_merge``."""
    (pname, p), (cname, c) = prev, cont
    earlier = p.get("merged")
    if earlier is not None:  # a merge already (a resumed or re-done sweep): its times are on its reference's scale
        p = {**{k: v for k, v in p.items() if k != "merged"}, "shard": {"index": 1, "count": 1}}
    if _shard(p, pname) != (1, 1):
        raise MergeError(f"{pname} is a shard: resume the merge of its shards instead")
    held = set(p["genomes"])
    if c.get("resumes") != p.get("created"):
        raise MergeError(
            f"{cname} does not continue {pname} (it continues the sweep created {c.get('resumes')}, "
            f"{pname} was created {p.get('created')})"
        )
    extra = [k for k in c["genomes"] if k in held and k != p["baseline_key"]]
    if extra:
        raise MergeError(f"{cname} measured {len(extra)} genome(s) {pname} holds already, e.g. {extra[0]}")
    p2 = {**p, "shard": {**p["shard"], "index": 1, "count": 2}, "stopped": "complete"}  # its stop: why c exists
    c2 = {**c, "shard": {**c["shard"], "index": 2, "count": 2}}
    out = merge(
        [(pname, p2), (cname, c2)],
        allow_partial,
        command,
        owns=lambda key, part: key == p["baseline_key"] or (key in held) == (part == 1),
    )
    out["merged"]["rule"] = (
        "a time-limited sweep (part 1, the reference) and its continuation (part 2: the "
        "baseline again and the genomes part 1 lacks); " + out["merged"]["rule"].split("; ", 1)[1]
    )
    out["merged"]["shards"][0]["stopped"] = p.get("stopped")
    if earlier is not None:
        out["merged"]["shards"][0]["earlier_merge"] = earlier  # how part 1 itself was put together
    return out


def merge(
    files: Sequence[tuple[str, dict[str, Any]]],
    allow_partial: bool = False,
    command: str = "",
    owns: Callable[[str, int], bool] | None = None,
) -> dict[str, Any]:
    """Merge (name, sweep data) shards into one sweep's data; see the module docstring for the rules.
    ``owns(key, index)``: which part holds a genome (default: the seeded order's shard partition)."""
    if not files:
        raise MergeError("no shard files given")
    parts = [(_shard(d, name), name, d) for name, d in files]
    (i0, n0), name0, _ = parts[0]
    for (i, n), name, _ in parts[1:]:
        if n != n0:
            raise MergeError(f"{name} is shard {i}/{n} but {name0} is shard {i0}/{n0}: not shards of one partition")
    idx: dict[int, tuple[str, dict[str, Any]]] = {}
    for (i, n), name, d in parts:
        if i in idx:
            raise MergeError(f"{name} and {idx[i][0]} are both shard {i}/{n}")
        idx[i] = (name, d)
    files = [idx[i] for i in sorted(idx)]
    _check_same(files)
    ref_name, ref = files[0]
    count = int(ref["shard"]["count"])
    order: list[str] = list(ref["space"]["order"])
    pos = {k: j for j, k in enumerate(order)}
    base_key = ref["baseline_key"]
    if not order or order[0] != base_key:
        raise MergeError(f"{ref_name}: the seeded order does not start with the baseline")

    def base_median(name: str, d: Mapping[str, Any]) -> dict[str, float]:
        e = d["genomes"].get(base_key)
        if not e or not all(e.get("t", {}).get(g["name"]) for g in d["geometries"]):
            raise MergeError(f"{name} has no baseline times for every geometry: its genomes have no reference")
        return {g["name"]: _median(e["t"][g["name"]]) for g in d["geometries"]}

    b_ref = base_median(ref_name, ref)
    entries: dict[str, tuple[dict[str, Any], int]] = {}  # key -> (entry, its shard's index)
    owner: dict[str, str] = {}
    shards_meta = []
    scales: dict[int, dict[str, float] | None] = {}
    for name, d in files:
        i = int(d["shard"]["index"])
        b_own = base_median(name, d)
        scales[i] = None if d is ref else {n: b_ref[n] / b_own[n] for n in b_ref}
        paired: dict[str, list[float]] = {n: [] for n in b_ref}
        for key, e in d["genomes"].items():
            if key not in pos:
                raise MergeError(f"{name}: genome {key} is not in the sweep's valid genomes")
            if not (owns(key, i) if owns else in_shard(pos[key], i, count)):
                raise MergeError(f"{name}: genome {key} belongs to another shard than {i}/{count}")
            for n, v in e.get("b", {}).items():
                paired.setdefault(n, []).extend(v)
            if key == base_key:
                continue  # every shard has one; the reference's is the output's
            if key in owner:  # unreachable with distinct indices and the partition check; kept as a guard
                raise MergeError(f"genome {key} is in both {owner[key]} and {name}")
            owner[key] = name
            entries[key] = (e, i)
        shards_meta.append(
            {
                "index": i,
                "count": count,
                "file": name,
                "created": d.get("created"),
                "command": d.get("command"),
                "stopped": d.get("stopped"),
                "genomes": len(d["genomes"]),
                "device": d.get("device"),
                "copy_ceiling": d.get("copy_ceiling"),
                "launches": d.get("launches"),
                "aa": d.get("aa"),
                "baseline": d["genomes"][base_key],
                "baseline_median_us": b_own,
                "scale": scales[i] or {n: 1.0 for n in b_ref},
                # the median of every baseline round measured next to a genome: how the shard's GPU ran on the whole
                "paired_baseline_median_us": {n: round(_median(v), 4) for n, v in paired.items() if v},
            }
        )
    entries[base_key] = (ref["genomes"][base_key], int(ref["shard"]["index"]))

    # The same variant: the genome first in the seeded order that was measured (has a status) keeps its entry.
    canon: dict[str, str] = {}
    for key in sorted(entries, key=pos.__getitem__):
        e = entries[key][0]
        if "status" in e and e.get("sass"):
            canon.setdefault(variant_key(e["sass"], e.get("launch", "")), key)
    genomes: dict[str, Any] = {}
    twice: list[float] = []
    for key in order:
        if key not in entries:
            continue
        e, i = entries[key]
        digest = e.get("sass")
        first = canon.get(variant_key(digest, e.get("launch", ""))) if digest else None
        if first is not None and first != key:
            if "t" in e and "t" in entries[first][0]:  # the same code measured in two shards: compare them
                c, ci = entries[first]
                es, cs = _scaled(e, scales[i]), _scaled(c, scales[ci])
                twice.extend(_median(es["t"][n]) / _median(cs["t"][n]) for n in es["t"] if n in cs["t"])
            genomes[key] = {"same_as": first, "sass": digest, **({"launch": e["launch"]} if e.get("launch") else {})}
        else:
            genomes[key] = _scaled(e, scales[i])

    missing = [k for k in order if k not in genomes]
    problems = [f"shard {j}/{count} not given" for j in range(1, count + 1) if j not in idx]
    problems += [
        f"shard {d['shard']['index']}/{count} stopped: {d.get('stopped')}"
        for _, d in files
        if d.get("stopped") != "complete"
    ]
    if missing and not problems:
        problems.append("genomes absent from complete shards")  # not from sweep.py; reported all the same
    stopped = "complete"
    if missing or problems:
        stopped = f"partial merge: {len(missing)} of {len(order)} valid genomes not recorded ({'; '.join(problems)})"
        if not allow_partial:
            raise MergeError(
                f"incomplete: {stopped[len('partial merge: ') :]}; pass --allow-partial to write it "
                "anyway (marked as partial)"
            )
    peer = next((d["peer_torch_compile"] for _, d in files if d.get("peer_torch_compile")), {})
    out = {k: ref.get(k) for k in ("format", "family")}
    out.update(
        {
            "created": max(str(d.get("created", "")) for _, d in files),  # when the last measurement was made
            "command": command or "tools/merge_sweeps.py " + " ".join(n for n, _ in files),
            "stopped": stopped,
            "device": ref.get("device"),
            "copy_ceiling": ref.get("copy_ceiling"),
            "latency_floor": ref.get("latency_floor"),  # (absent from sweeps before 2026-12-03)
            "geometries": ref["geometries"],
            "seeds": ref["seeds"],
            "runs": ref["runs"],
            "rounds": ref["rounds"],
            "aa_rounds": ref.get("aa_rounds"),
            "launches": ref.get("launches"),
            "batch_ms": ref.get("batch_ms"),
            "launch": ref.get("launch", "plain"),
            "baseline_key": base_key,
            "baseline_hashes": ref["baseline_hashes"],
            "baseline_errors": ref["baseline_errors"],
            "aa": ref.get("aa"),
            "peer_torch_compile": peer,
            "seed": ref.get("seed"),
            "space": ref["space"],
            "merged": {
                "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "rule": (
                    "shards of tools/sweep.py --shard I/N; the baseline entry, A/A pairs, device, copy ceiling, "
                    "latency floor and launches are the reference shard's (the first); every other shard's genome "
                    "times t and b are multiplied per geometry by scale = median(reference baseline t) / "
                    "median(its shard's baseline t), so each genome is relative to the baseline of its own run; "
                    "identical SASS: same_as the genome first in the seeded order"
                ),
                "reference_shard": int(ref["shard"]["index"]),
                "shards": shards_meta,
                "identical_sass_measured_twice": {
                    "pairs_x_geometries": len(twice),
                    "time_ratio_median": round(_median(twice), 5) if twice else None,
                    "time_ratio_max_dev": round(max(abs(r - 1.0) for r in twice), 5) if twice else None,
                },
                "missing": missing,
            },
            "genomes": genomes,
        }
    )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shards", nargs="+", help="the shard files (tools/sweep.py --shard I/N --out ...)")
    ap.add_argument("--out", required=True, help="the merged sweep's .json.xz")
    ap.add_argument(
        "--allow-partial",
        action="store_true",
        help="write the file even when genomes are missing (its 'stopped' says so)",
    )
    args = ap.parse_args(argv)
    try:
        files = [(p, load(p)) for p in args.shards]
        out = merge(files, args.allow_partial, "python tools/merge_sweeps.py " + " ".join(sys.argv[1:]))
    except (MergeError, OSError, sweepfile.SweepFileError) as e:
        print(f"merge_sweeps: error: {e}", file=sys.stderr)
        return 2
    for s in out["merged"]["shards"]:
        scale = ", ".join(f"{n} x{v:.4f}" for n, v in s["scale"].items())
        print(f"shard {s['index']}/{s['count']} ({s['file']}): {s['genomes']} genomes, {s['stopped']}; scale {scale}")
    tw = out["merged"]["identical_sass_measured_twice"]
    if tw["pairs_x_geometries"]:
        print(
            f"identical SASS measured in two shards: {tw['pairs_x_geometries']} genome x geometry pairs, time "
            f"ratio median {tw['time_ratio_median']}, largest deviation {tw['time_ratio_max_dev']}"
        )
    print(f"merged: {len(out['genomes'])} of {out['space']['valid']} valid genomes; {out['stopped']}")
    sweepfile.save(args.out, out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
