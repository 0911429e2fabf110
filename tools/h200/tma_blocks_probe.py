"""genome_probe.py with the fp4_matvec tma ring sized for N resident blocks a SM (family.py TMA_SM_BLOCKS):

    python3 tools/h200/tma_blocks_probe.py N configs/fp4_matvec.yaml GENOMES.json [rounds]

A probe of a launch policy, not a knob: the family's own default stays what the recorded sweep measured.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import genome_probe  # noqa: E402

N = int(sys.argv.pop(1))
_load = genome_probe.load_config


def load_config(path):
    cfg = _load(path)
    sys.modules[type(cfg.family).__module__].TMA_SM_BLOCKS = N  # the module the config's family lives in
    return cfg


genome_probe.load_config = load_config

if __name__ == "__main__":
    raise SystemExit(genome_probe.main())
