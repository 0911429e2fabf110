"""A rule-based outside proposer: plain source edits from a fixed list of rules, no network.

Run as ``python -m evo.search.rules`` under the outside-proposer protocol
(see :mod:`evo.search.outside`): it reads the request (stdin, or the file
named by ``EVO_IDEA_REQUEST``), edits the champion's ``kernel.cu``, and prints
one idea (``Title:``/``Rationale:``/``Exact:`` lines and a unified diff), or
nothing when every rule's edit was tried already.

Rules, in the order they are tried; the first edit whose change signature is
not in the request's ``tried_change_sha256`` is the answer. Only lines that
the champion actually compiles (they appear in ``resolved.cu``) are edited,
so an edit never lands in code its knob values switch off.

1. ``launch-bounds``: ``__launch_bounds__(N)`` -> ``__launch_bounds__(N, 2)``
   (at least two blocks per SM: the compiler caps registers to fit), and
   ``(N, k)`` -> ``(N, 2k)`` up to 8.
2. ``interchange``: two perfectly nested ``for`` loops under a line
   ``// evo-rule: interchange`` (the family's word that they may swap) get
   their headers swapped.
3. ``widen``: a line under ``// evo-rule: widen <from> <to>`` (or carrying that
   comment itself) gets the type ``<from>`` replaced by ``<to>``, e.g. 8-byte
   loads to 16-byte loads where the family says alignment allows it.
4. ``unroll``: ``#pragma unroll`` above a ``for`` loop without a pragma whose
   trip count is a compile-time constant, ``#pragma unroll 2`` above one
   bounded at run time.

Each rule keeps the arithmetic of every output element as it is, so every
answer says ``Exact: yes`` (the exact-mode correctness gate checks the claim).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass

FOR_RE = re.compile(r"^(\s*)for\s*\(")
LB_RE = re.compile(r"__launch_bounds__\(\s*([^,()]+?)\s*(?:,\s*(\d+)\s*)?\)")
MARK_RE = re.compile(r"//\s*evo-rule:\s*(interchange|widen)\b(.*)$")
KEYWORDS = {"int", "unsigned", "long", "short", "size_t", "const", "auto", "char", "u32", "u16", "float", "sizeof"}


@dataclass
class Edit:
    rule: str
    title: str
    rationale: str
    source: str


def _live(line: str, resolved: set[str]) -> bool:
    return not resolved or line.strip() in resolved


def _prev_code(lines: list[str], i: int) -> str:
    j = i - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    return lines[j].strip() if j >= 0 else ""


def _for_header(line: str) -> tuple[str, str, str] | None:
    """(indent, header inside the parentheses, rest after them) of a line that starts a for loop."""
    m = FOR_RE.match(line)
    if not m:
        return None
    depth, start = 0, m.end() - 1
    for k in range(start, len(line)):
        depth += {"(": 1, ")": -1}.get(line[k], 0)
        if depth == 0:
            return m.group(1), line[start + 1 : k], line[k + 1 :]
    return None


def _constant_trip(header: str) -> bool:
    """True when init and condition name only the loop variable, numbers and UPPER_CASE macros."""
    parts = header.split(";")
    if len(parts) != 3:
        return False
    m = re.search(r"(\w+)\s*=", parts[0])
    var = m.group(1) if m else ""
    names = set(re.findall(r"[A-Za-z_]\w*", parts[0] + " " + parts[1])) - KEYWORDS - {var}
    return all(n.isupper() or n.startswith("EVO_") for n in names)


def launch_bounds(lines: list[str], resolved: set[str]) -> Iterator[Edit]:
    for i, ln in enumerate(lines):
        m = LB_RE.search(ln)
        if not m or not _live(ln, resolved):
            continue
        k = int(m.group(2)) if m.group(2) else 1
        if k >= 8:
            continue
        new = ln[: m.start()] + f"__launch_bounds__({m.group(1)}, {k * 2})" + ln[m.end() :]
        yield Edit(
            "launch-bounds",
            f"__launch_bounds__ with at least {k * 2} blocks per SM",
            f"Asking for {k * 2} resident blocks per SM (was {k}) makes the compiler cap registers per thread "
            "so that more warps fit, which hides more memory latency in a bandwidth-bound kernel; it may "
            "spill, which the static gate reports.",
            _replace(lines, i, [new]),
        )


def interchange(lines: list[str], resolved: set[str]) -> Iterator[Edit]:
    for i, ln in enumerate(lines):
        m = MARK_RE.search(ln)
        if not m or m.group(1) != "interchange":
            continue
        j = i + 1
        while j < len(lines) and lines[j].lstrip().startswith("#pragma"):
            j += 1
        k = j + 1
        while k < len(lines) and lines[k].lstrip().startswith("#pragma"):
            k += 1
        if k >= len(lines):
            continue
        a, b = _for_header(lines[j]), _for_header(lines[k])
        if not a or not b or a[2].strip() != "{" or not _live(lines[j], resolved):
            continue
        new_outer = f"{a[0]}for ({b[1]}){a[2]}"
        new_inner = f"{b[0]}for ({a[1]}){b[2]}"
        out = list(lines)
        out[j], out[k] = new_outer, new_inner
        yield Edit(
            "interchange",
            f"Interchange the loops at line {j + 1}",
            "The family marks these two loops as free to swap. With the other loop outside, consecutive "
            "iterations of the inner loop touch neighbouring addresses, so loads coalesce better; every "
            "element still gets the same operations.",
            "\n".join(out) + "\n",
        )


def widen(lines: list[str], resolved: set[str]) -> Iterator[Edit]:
    for i, ln in enumerate(lines):
        m = MARK_RE.search(ln)
        if not m or m.group(1) != "widen":
            continue
        args = m.group(2).split()
        if len(args) < 2:
            continue
        src, dst = args[0], args[1]
        target = i if re.search(rf"\b{re.escape(src)}\b", ln[: m.start()]) else i + 1
        if target >= len(lines) or not re.search(rf"\b{re.escape(src)}\b", lines[target]):
            continue
        if not _live(lines[target], resolved):
            continue
        code, comment = (lines[target][: m.start()], lines[target][m.start() :]) if target == i else (lines[target], "")
        new = re.sub(rf"\b{re.escape(src)}\b", dst, code) + comment
        yield Edit(
            "widen",
            f"Wider loads: {src} -> {dst} at line {target + 1}",
            f"The family marks {src} here as safe to widen to {dst}: fewer, wider memory instructions move "
            "the same bytes, which matters for a bandwidth-bound loop.",
            _replace(lines, target, [new]),
        )


def unroll(lines: list[str], resolved: set[str]) -> Iterator[Edit]:
    for i, ln in enumerate(lines):
        m = _for_header(ln)
        if not m or _prev_code(lines, i).startswith(("#pragma unroll", "#pragma nounroll")):
            continue
        if not _live(ln, resolved):
            continue
        const = _constant_trip(m[1])
        pragma = "#pragma unroll" if const else "#pragma unroll 2"
        what = (
            "fully unrolled (its trip count is a compile-time constant)"
            if const
            else "unrolled by 2 (its trip count is known only at run time)"
        )
        yield Edit(
            "unroll",
            f"{pragma} on the loop at line {i + 1}",
            f"The loop `for ({m[1].strip()})` has no unroll pragma; {what}, independent iterations can "
            "issue their loads back to back and constant indices keep arrays in registers. The operations on "
            "each value and their order do not change.",
            _replace(lines, i, [pragma, ln]),
        )


def _replace(lines: list[str], i: int, new: list[str]) -> str:
    return "\n".join(lines[:i] + new + lines[i + 1 :]) + "\n"


RULES = (launch_bounds, interchange, widen, unroll)


def propose(source: str, resolved: str = "", tried: set[str] | frozenset[str] = frozenset()) -> tuple[Edit, str] | None:
    """The first edit (and its patch) whose change was not tried, or None."""
    from evo.search.ideas import IdeaError, change_signature, make_patch

    lines = source.splitlines()
    live = {ln.strip() for ln in resolved.splitlines() if ln.strip()}
    for rule in RULES:
        for edit in rule(lines, live):
            if edit.source == source:
                continue
            try:
                patch = make_patch(source, edit.source)
            except IdeaError:
                continue
            if change_signature(patch) not in tried:
                return edit, patch
    return None


def main(argv: list[str] | None = None) -> int:
    path = os.environ.get("EVO_IDEA_REQUEST")
    text = open(path).read() if path and os.path.isfile(path) else sys.stdin.read()
    try:
        req = json.loads(text)
    except json.JSONDecodeError as e:
        sys.stderr.write(f"rules: the request is not JSON: {e}\n")
        return 2
    got = propose(req.get("kernel_cu", ""), req.get("resolved_cu", ""), set(req.get("tried_change_sha256", [])))
    if got is None:
        return 0  # nothing left to try: no answer
    edit, patch = got
    sys.stdout.write(f"Title: {edit.title}\nRationale: {edit.rationale}\nExact: yes\n\n{patch}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
