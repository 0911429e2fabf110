"""Decode profiles: each kernel's share of decode time.

A profile is a YAML file::

    decode_noise_floor: 0.007        # relative run-to-run spread of decode tokens/s
    kernels:                         # time per decode step (any unit) or a share (0..1)
      mhc_pre_big_fuse: 41.3
      moe_q2_matvec: 1891.4
      other: 2100.0

or an import of a torch.profiler table (``key_averages()`` exported as CSV
with "Name" and a CUDA-time column) or an Nsight Systems ``cuda_gpu_kern_sum``
CSV ("Name" and "Total Time (ns)"). Kernel names are matched by substring.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

import yaml


class ProfileError(Exception):
    pass


@dataclass
class Profile:
    times: dict[str, float]  # kernel name -> time per decode step (any one unit)
    decode_noise_floor: float = 0.0
    source: str = ""
    aliases: dict[str, str] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(self.times.values())

    def share(self, kernel: str) -> float:
        """Share of decode time of every profiled kernel whose name contains ``kernel``."""
        hit = sum(t for name, t in self.times.items() if kernel in name)
        if hit == 0:
            raise ProfileError(
                f"kernel {kernel!r} is not in the profile {self.source} (names: {', '.join(sorted(self.times)[:8])}...)"
            )
        return hit / self.total


_TIME_COLUMNS = (
    "Total Time (ns)",
    "Self CUDA total (us)",
    "CUDA total (us)",
    "Self CUDA",
    "CUDA total",
    "self_device_time_total",
    "device_time_total",
    "cuda_time_total",
    "self_cuda_time_total",
)


def load_profile(path: str | Path) -> Profile:
    p = Path(path)
    if not p.is_file():
        raise ProfileError(f"{p}: no such profile file")
    from evo.inputs import InputError, load_yaml, read_text

    try:
        text = read_text(p, 64 << 20 if p.suffix.lower() == ".csv" else 1 << 20)  # nsys exports can be large
    except InputError as e:
        raise ProfileError(str(e)) from None
    except OSError as e:
        raise ProfileError(f"{p}: cannot be read ({e.strerror or e})") from None
    if p.suffix.lower() == ".csv":
        import io

        rows = list(csv.DictReader(io.StringIO(text, newline="")))
        if not rows:
            raise ProfileError(f"{p}: empty CSV")
        col = next((c for c in _TIME_COLUMNS if c in rows[0]), None)
        name_col = next((c for c in ("Name", "name", "Kernel", "key") if c in rows[0]), None)
        if col is None or name_col is None:
            raise ProfileError(f"{p}: needs a Name column and one of: {', '.join(_TIME_COLUMNS)}")
        times: dict[str, float] = {}
        for r in rows:
            try:
                t = float(str(r[col]).replace(",", "").replace("us", "").replace("ms", "").strip() or 0)
            except ValueError:
                continue
            if not math.isfinite(t):
                raise ProfileError(f"{p}: {r[name_col]!r}: {col} {r[col]!r} is not a finite time")
            times[r[name_col]] = times.get(r[name_col], 0.0) + t
        return Profile({k: v for k, v in times.items() if v > 0}, 0.0, str(p))
    try:
        raw = load_yaml(text)
    except yaml.YAMLError as e:
        from evo.inputs import yaml_problem

        raise ProfileError(f"{p}: not valid YAML{yaml_problem(e)}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("kernels"), dict) or not raw["kernels"]:
        raise ProfileError(f"{p}: expected a mapping with 'kernels: {{name: time}}'")
    times = {}
    for k, v in raw["kernels"].items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ProfileError(f"{p}: kernels.{k}: expected a time >= 0, got {v!r}")
        times[str(k)] = float(v)
    floor = raw.get("decode_noise_floor", 0.0)
    if isinstance(floor, bool) or not isinstance(floor, (int, float)) or not (0 <= floor < 1):
        raise ProfileError(f"{p}: decode_noise_floor: expected a fraction in [0, 1), got {floor!r}")
    return Profile(times, float(floor), str(p))
