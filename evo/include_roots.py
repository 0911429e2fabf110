"""The folders a kernel's includes resolve from: called by `evo new --kernel` to write the family's
``include_dirs`` and to say which headers it could not place.

An engine's kernel includes its headers by a path from the engine's include root (FlashInfer's
``include/flashinfer/norm.cuh`` includes ``"flashinfer/utils.cuh"``; a ``csrc/mhc/x.cu`` includes
``"tvm_ffi_utils.h"`` that lies in ``csrc/``). The kernel is copied (or linked) into the family folder, so none of
its quoted includes resolves beside it any more: for each one, the kernel's folder and its ancestors (up to the
repository's root, the folder holding ``.git``, and at most four levels up), each with its ``include/`` subfolder,
are tried, nearest first, and the first folder the path resolves from is an include root. The headers found are
read in turn (a bounded number), so that a header's own includes find their root too: a quoted one resolves beside
its header as the compiler resolves it, else from a root; an ``<...>`` one only from a root (never reported missing:
it is the toolkit's or the system's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from evo.kernel_source import includes

# The top folders of torch's C++ headers: a kernel that includes one is a torch extension (build.torch_headers).
TORCH_TOPS = ("torch", "c10", "ATen")
LEVELS = 4  # ancestors of the kernel's folder searched, at most
MAX_FILES = 400  # headers read, at most (a header library's includes close over far fewer)


@dataclass
class IncludeRoots:
    """Where a kernel's includes resolve from."""

    folders: dict[Path, list[str]] = field(default_factory=dict)  # an include root -> the includes it resolves
    missing: list[tuple[str, Path]] = field(default_factory=list)  # (quoted include found nowhere, its includer)
    torch: list[str] = field(default_factory=list)  # torch's headers it includes (torch/, c10/, ATen/): torch_headers


def listed(names: list[str], most: int = 4) -> str:
    """``a, b, c, d and 3 more``: a list of headers short enough for one line."""
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def candidate_roots(folder: Path) -> list[Path]:
    """``folder`` and its ancestors up to the repository's root or LEVELS up, each followed by its
    ``include/`` subfolder where there is one: the folders an include root is looked for in, nearest first."""
    out = []
    for _ in range(LEVELS + 1):
        out.append(folder)
        if (folder / "include").is_dir():
            out.append(folder / "include")
        if (folder / ".git").exists() or folder.parent == folder:
            break
        folder = folder.parent
    return out


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def find_include_roots(kernel: Path, source: str | None = None) -> IncludeRoots:
    """The include roots of ``kernel`` (its text ``source`` when already read). Its own quoted includes never
    resolve beside it (evo compiles a copy or link of it from the family folder), so its own folder counts as a
    root where one of them lies there."""
    kernel = kernel.resolve()
    candidates = candidate_roots(kernel.parent)
    found = IncludeRoots()
    queue: list[tuple[Path, str]] = [(kernel, _read(kernel) if source is None else source)]
    seen = {kernel}
    while queue and len(seen) <= MAX_FILES:
        path, text = queue.pop(0)
        for quoted in (True, False):
            for inc in includes(text, quoted):
                beside = path.parent / inc
                if quoted and path != kernel and beside.is_file():
                    hit = beside.resolve()
                else:
                    resolved = _resolve(inc, found, candidates)
                    if resolved is None:
                        if "/" in inc and inc.split("/", 1)[0] in TORCH_TOPS:
                            found.torch += [inc] if inc not in found.torch else []  # torch_headers finds them
                        elif quoted:
                            found.missing.append((inc, path))
                        continue
                    hit = resolved
                if hit not in seen:
                    seen.add(hit)
                    queue.append((hit, _read(hit)))
    return found


def _resolve(inc: str, found: IncludeRoots, candidates: list[Path]) -> Path | None:
    """The file ``inc`` names from the roots chosen so far, else from the first candidate it resolves from (which
    becomes a root); None where neither holds it."""
    for root in [*found.folders, *candidates]:
        if (root / inc).is_file():
            found.folders.setdefault(root, [])
            if inc not in found.folders[root]:
                found.folders[root].append(inc)
            return (root / inc).resolve()
    return None
