"""The family kernel's share of a real decode, from a torch.profiler capture (``python -m evo.e2e.hf --profile``).

Writes ``Name,Total Time (ns)``, time per decode step, the CSV evo/measure/profile.py's ``load_profile`` reads
(``bound: {profile: OUT.csv}``; the bound's ``kernel`` is the family's name). Only the decode steps are
captured (the prefill runs before the profiler starts), eagerly: a CUDA graph replays the same kernels, and
kernel times, unlike a range's span, hold no launch gaps.

* On CUDA: one row per GPU kernel (its device time); the family's kernel rows (their names hold the family's
  name or the compiled entry point's) are summed into one row named as the family. The share is of the GPU's
  kernel time, which a CUDA-graph decode of batch 1 is made of.
* On the CPU: the family's calls (a record_function range named as the family: the torch reference) and
  ``other``, the rest of the decode's wall time. A CPU share of a torch reference says nothing of a GPU's:
  it is there so the command and its reader are exercised where no GPU is.
"""

from __future__ import annotations

import csv
import time
import warnings
from pathlib import Path
from typing import Any


def _on_cuda(ev: Any) -> bool:
    return str(getattr(ev, "device_type", "CPU")).endswith("CUDA")


def gpu_rows(rows: Any, names: list[str], family: str | None) -> dict[str, float]:
    """Microseconds of device time per kernel from ``key_averages()`` rows, the family's kernels as one row."""
    out: dict[str, float] = {}
    for ev in rows:
        if not _on_cuda(ev) or ev.key == family:  # a CPU op, or the span of a range on the GPU timeline
            continue
        t = float(getattr(ev, "self_device_time_total", 0.0) or 0.0)
        key = family if family and any(n and n in ev.key for n in names) else ev.key
        out[key] = out.get(key, 0.0) + t
    return {k: v for k, v in out.items() if v > 0}


def cpu_rows(rows: Any, wall_us: float, family: str | None) -> dict[str, float]:
    """Microseconds of CPU time: the family's range (inclusive) and the rest of the decode's wall time."""
    fam = sum(float(ev.cpu_time_total) for ev in rows if family and ev.key == family and not _on_cuda(ev))
    out = {"other": max(wall_us - fam, 0.0)}
    if family:
        out[family] = fam
    return out


def write_csv(path: Path, per_step_ns: dict[str, float]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["Name", "Total Time (ns)"])
        for k, v in sorted(per_step_ns.items(), key=lambda kv: (-kv[1], kv[0])):
            w.writerow([k, f"{v:.1f}"])


def profile_decode(dec: Any, n: int, path: Path, family: str | None, carry: Any) -> tuple[list[int], str]:
    """Prefill, then ``n`` eager decode steps under torch.profiler; writes ``path``; (the token ids, a note)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    cuda = dec.ids.device.type == "cuda"
    names = [family or ""]
    impl = getattr(carry, "impl", None)
    loaded = getattr(impl, "loaded", None)
    if loaded is not None:  # the compiled entry points' (lowered) names, as the profiler shows them
        names += [m.function for m in loaded.built.modules.values()]
    dec.prefill()
    tokens = [int(dec.ids[0, 0])]
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    if carry is not None:
        carry.profiling = not cuda  # ranges name the reference's calls on the CPU; on CUDA the kernels name themselves
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            with profile(activities=acts) as prof:
                t0 = time.perf_counter()
                for _ in range(n):
                    dec.step()
                    tokens.append(int(dec.ids[0, 0]))
                if cuda:
                    torch.cuda.synchronize()
                wall_us = (time.perf_counter() - t0) * 1e6
    finally:
        if carry is not None:
            carry.profiling = False
    rows = prof.key_averages()
    times = gpu_rows(rows, names, family) if cuda else cpu_rows(rows, wall_us, family)
    per_step = {k: v * 1000.0 / n for k, v in times.items()}
    write_csv(path, per_step)
    total = sum(per_step.values()) or 1.0
    share = f"{family} {per_step.get(family, 0.0) / total:.2%} of " if family else ""
    return tokens, f"{share}{total / 1000:.1f} us per step ({'GPU kernel time' if cuda else 'CPU wall time'})"
