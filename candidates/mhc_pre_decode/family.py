"""mhc_pre_decode: mhc_pre_big_fuse (../mhc_pre_big_fuse/family.py and its kernel.cu) with the decode knobs
(DECODE_KNOBS there).

A family of its own so that mhc_pre_big_fuse's knob space, and the recorded sweep that covers it, stay as they are.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parent.parent / "mhc_pre_big_fuse" / "family.py"
_spec = importlib.util.spec_from_file_location("evo_family_mhc_pre_big_fuse_for_decode", _PATH)
assert _spec is not None and _spec.loader is not None
_mod = importlib.util.module_from_spec(_spec)
# importable by name, as evo's loader makes every family module: torch.compile (the peer) imports the module of
# the reference it traces
sys.modules[_spec.name] = _mod
_spec.loader.exec_module(_mod)

FAMILY = _mod.DECODE_FAMILY
