"""The backends a campaign can measure on, by name (the config's ``backend`` and the CLI's ``--backend`` take
these), and the factory an isolated worker process runs for each (evo/backend_factories.py, named as
"module:function" because harness/worker.py starts it in a fresh process). ``auto`` picks ``gpu`` where a CUDA GPU
is visible, else ``recorded`` (the family's recorded sweep).
"""

from __future__ import annotations

BACKENDS = ("auto", "gpu", "recorded")  # what configs and the CLI's --backend accept
WORKER_FACTORIES = {"gpu": "evo.backend_factories:gpu_backend", "recorded": "evo.backend_factories:recorded_backend"}
