import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _gpu() -> tuple[bool, str]:
    try:
        import cupy

        n = cupy.cuda.runtime.getDeviceCount()
        return n > 0, f"{n} GPU(s)"
    except Exception as e:  # no driver, no device
        return False, f"no CUDA GPU visible ({type(e).__name__})"


HAVE_GPU, GPU_WHY = _gpu()


def pytest_collection_modifyitems(config, items):
    if HAVE_GPU:
        return
    skip = pytest.mark.skip(reason=f"needs a GPU: {GPU_WHY}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory, monkeypatch):
    # One compile cache per test session: compiled cubins are reused across tests, never across sessions.
    d = tmp_path_factory.getbasetemp() / "cubin-cache"
    monkeypatch.setenv("EVO_CACHE_DIR", os.environ.get("EVO_TEST_CACHE_DIR", str(d)))
