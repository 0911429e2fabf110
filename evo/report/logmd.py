"""The human-readable side of the ledger: the markdown attempt log and `evo status`.

Everything here reads only :class:`Attempt` records and the campaign meta dict,
and tolerates anything missing, because the log is rewritten after every
attempt, including the first one and after a crash.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evo.core.records import ACCEPTED, BASELINE, ERROR, REJECTED, SIMULATED_LABEL, Attempt, simulated_label
from evo.measure.ceiling import FLOOR_META, describe_floor, floor_multiple, floor_us, latency_bound
from evo.measure.ceiling import describe as ceiling_describe
from evo.report import nvbench_peer
from evo.report.converged import convergence
from evo.report.finish_log import finish_section
from evo.report.peer_log import peer_kernel_lines
from evo.report.plot_legend import MEASURED_IN_FULL, STOPPED_EARLY, legend, plot_kind, unplotted
from evo.search.ideas import book_from_meta, delta, describe_change, idea_events

DASH = "–"
SIMULATED_BANNER = (
    "**Simulated from recorded H200 measurements** (no GPU on this machine; "
    "timings and hashes are replayed from the committed sweep)"
)


# --- small formatting helpers -------------------------------------------------
def _label(meta: Mapping[str, Any]) -> str:
    """Where a simulated campaign's numbers come from, as its backend said (a Kernel Tuner cache names its device)."""
    return simulated_label((meta or {}).get("device") or {})


def _cell(x: Any) -> str:
    """A table cell: no pipes or newlines may break the row."""
    s = "" if x is None else str(x)
    return s.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ").strip() or DASH


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
    return out


def _us(x: Any) -> str:
    return f"{x:.2f}" if isinstance(x, (int, float)) else DASH


def _num(x: Any, digits: int = 3) -> str:
    return f"{x:.{digits}f}" if isinstance(x, (int, float)) and not isinstance(x, bool) else DASH


_NUMBER_TAIL = re.compile(r"[-+]?\d[\d.,]*$")  # the digits of a number the cut fell in


def _short(s: str, n: int = 160) -> str:
    """``s`` on one line, at most ``n`` characters: cut at a space, never inside a number (`[0.942, 0.…`)."""
    s = " ".join(str(s).split())
    if len(s) <= n:
        return s
    cut = s[: n - 1]
    if s[n - 1] != " ":  # the cut falls inside a word: end before it where a space is near, else before its digits
        space = cut.rfind(" ")
        cut = cut[:space] if space >= n // 2 else _NUMBER_TAIL.sub("", cut)
    return cut.rstrip(" ,;:([") + "…"


def _kv(d: Any) -> str:
    """A flat or nested dict as `a=1, b: c=2` for one line of text."""
    if not isinstance(d, Mapping):
        return DASH if d is None else str(d)
    parts = []
    for k, v in d.items():
        parts.append(f"{k}: {_kv(v)}" if isinstance(v, Mapping) else f"{k}={v}")
    return ", ".join(parts) or DASH


def _elapsed(s: Any) -> str:
    if not isinstance(s, (int, float)):
        return DASH
    m, sec = divmod(int(round(s)), 60)
    h, m = divmod(m, 60)
    return f"{h}h {m:02d}m {sec:02d}s" if h else (f"{m}m {sec:02d}s" if m else f"{s:.1f} s")


# --- campaign structure ---------------------------------------------------------
def _geometries(attempts: Sequence[Attempt], meta: Mapping[str, Any]) -> list[tuple[str, float]]:
    """(name, weight) from the config, else every geometry any attempt was timed at (weight 1)."""
    cfg = meta.get("config") or {}
    out: list[tuple[str, float]] = []
    for g in cfg.get("geometries") or []:
        if isinstance(g, Mapping) and g.get("name"):
            out.append((str(g["name"]), float(g.get("weight", 1.0) or 0.0)))
    if out:
        return out
    seen: dict[str, None] = {}
    for a in attempts:
        for name in (*a.timings, *a.speedup_vs_baseline):
            seen.setdefault(name, None)
    return [(n, 1.0) for n in seen]


def _gname(name: str, weight: float) -> str:
    return f"{name} (watched)" if weight == 0 else name


def _baseline(attempts: Sequence[Attempt], meta: Mapping[str, Any]) -> Attempt | None:
    bid = meta.get("baseline_id")
    for a in attempts:
        if bid is not None and a.id == bid:
            return a
    return next((a for a in attempts if a.verdict.status == BASELINE), None)


def champion_chain(attempts: Sequence[Attempt], meta: Mapping[str, Any]) -> list[Attempt]:
    """Baseline first, then every accepted attempt in id order."""
    base = _baseline(attempts, meta)
    acc = sorted((a for a in attempts if a.verdict.status == ACCEPTED), key=lambda a: a.id)
    return ([base] if base else []) + acc


def _change(a: Attempt, prev: Mapping[str, Any] | None) -> str:
    """Knob changes as ``k a->b``, source-level ideas as ``+idea <slug>`` / ``-idea <slug>``."""
    return DASH if prev is None else describe_change(a.genome, prev)


def _delta(a: Attempt, prev: Mapping[str, Any] | None) -> str:
    """The knob=value settings and ideas ``a`` made relative to ``prev`` (the rejected-idea key)."""
    if prev is None:
        return "(no parent)"
    return delta(a.genome, prev)


def _verdict_counts(attempts: Sequence[Attempt]) -> list[tuple[str, int]]:
    return Counter(a.verdict.label() for a in attempts).most_common()


def _first_resources(a: Attempt) -> str:
    if not a.resources:
        return DASH
    r = next(iter(a.resources.values()))
    return f"{r.registers}/{r.stack_frame}/{r.spills}"


# --- the log ----------------------------------------------------------------------
def _setup(
    attempts: Sequence[Attempt], meta: Mapping[str, Any], geoms: list[tuple[str, float]], base: Attempt | None
) -> list[str]:
    cfg = meta.get("config") or {}
    dev = meta.get("device") or {}
    L = ["## Setup", ""]
    L.append(f"- Device: {dev.get('name', DASH)} (uuid {dev.get('uuid', DASH)})")
    L.append(
        f"- Driver {dev.get('driver', DASH)}, CUDA {dev.get('cuda', DASH)}, "
        f"NVRTC {dev.get('nvrtc', DASH)}, arch {dev.get('arch', DASH)}"
    )
    if "sm_clock_mhz" in dev or "max_sm_clock_mhz" in dev:
        L.append(
            f"- SM clock at start: {dev.get('sm_clock_mhz', DASH)} MHz (max {dev.get('max_sm_clock_mhz', DASH)} MHz)"
        )
    L += _clock_lines(attempts)
    cc = meta.get("copy_ceiling") or {}
    if cc:
        how = ""
        if cc.get("method"):  # since session 11: the best of several trials, each trial's figures kept
            tbps = [max(t.get("own_kernel_tbps") or 0, t.get("copyto_tbps") or 0) for t in cc.get("trials") or []]
            how = f"; {cc['method']}" + (f", trials {min(tbps):.3f}-{max(tbps):.3f} TB/s" if tbps else "")
        L.append(
            f"- Copy ceiling: {_num(cc.get('ceiling_tbps'))} TB/s "
            f"(own copy kernel {_num(cc.get('own_kernel_tbps'))} TB/s, "
            f"copyto {_num(cc.get('copyto_tbps'))} TB/s{how})"
        )
    else:
        L.append(f"- Copy ceiling: {DASH}")
    nf = meta.get("noise_floor") or {}
    if nf:
        per = ", ".join(f"{g} {v * 100:.3f}%" if isinstance(v, (int, float)) else f"{g} {DASH}" for g, v in nf.items())
        floor = meta.get("floor")
        L.append(
            f"- A/A noise floor: {per}"
            + (f" (floor used: {floor * 100:.3f}%)" if isinstance(floor, (int, float)) else "")
        )
    else:
        L.append(f"- A/A noise floor: {DASH}")
    sessions = meta.get("sessions") or []
    if len(sessions) > 1 or (sessions and not nf):
        L.append("- Sessions (the floor is measured again at every start; each session's attempts use its own):")
        for s in sessions:
            per = ", ".join(f"{g} {v * 100:.3f}%" for g, v in (s.get("floors") or {}).items())
            L.append(
                f"  - {s.get('at', DASH)} ({s.get('backend', DASH)}): {per}; threshold {_num(s.get('threshold'), 4)}"
            )
    gates = cfg.get("gates")
    if isinstance(gates, Mapping) and gates:
        L.append("- Gates:")
        L += [f"  - {k}: {_kv(v)}" for k, v in gates.items()]
    else:
        L.append(f"- Gates: {_kv(gates)}")
    L.append(f"- Budget: {_kv(cfg.get('budget'))}")
    L.append(f"- Proposer: {_kv(cfg.get('proposer'))}")
    L.append(f"- Backend: {meta.get('backend') or cfg.get('backend') or DASH}")
    if cfg.get("searched_knobs"):  # a recorded sweep of a sub-space: the campaign searched only what it holds
        L.append(f"- Knob values searched (the backend measures no others): {'; '.join(cfg['searched_knobs'])}")
    perf = gates.get("perf") if isinstance(gates, Mapping) else None
    if isinstance(perf, Mapping) and perf.get("launch", "plain") != "plain":
        L.append(
            f"- Launches: {perf['launch']} (gates.perf.launch): programmatic dependent launch for the kernels the "
            "family calls PDL-safe, so each may overlap the launch before it; the others plainly. Each timing's "
            "method names every part's launch"
        )
    L.append(f"- Started: {meta.get('started_at') or DASH}; elapsed {_elapsed(meta.get('elapsed_s'))}")
    if cfg.get("command"):
        L.append(f"- Command: `{cfg['command']}`")
    if base is not None and base.timings:
        L += ["", "Measurement method (baseline):", ""]
        names = [g for g, _ in geoms if g in base.timings] + [g for g in base.timings if g not in dict(geoms)]
        L += [f"- {g}: {base.timings[g].method or DASH}" for g in names]
    return L + [""]


def _clock_lines(attempts: Sequence[Attempt]) -> list[str]:
    """SM clock ranges and throttling seen across attempts (keys are optional)."""

    def rng(key: str) -> tuple[float, float] | None:
        vals = [a.device[key] for a in attempts if isinstance(a.device.get(key), (int, float))]
        return (min(vals), max(vals)) if vals else None

    out: list[str] = []
    ends = [r for r in (rng("sm_mhz_min"), rng("sm_mhz_max")) if r]
    if ends:
        out.append(
            f"- SM clock while measuring: {min(r[0] for r in ends):g}–{max(r[1] for r in ends):g} MHz "
            f"(lowest per-attempt minimum to highest maximum)"
        )
    for key in ("sm_mhz_before", "sm_mhz_after"):
        r = rng(key)
        if r:
            out.append(f"- SM clock {key.rsplit('_', 1)[1]} measuring: {r[0]:g}–{r[1]:g} MHz")
    thr = [
        a.device["throttled_samples"] for a in attempts if isinstance(a.device.get("throttled_samples"), (int, float))
    ]
    if thr:
        out.append(f"- Throttled samples: {sum(thr):g} in {sum(1 for t in thr if t)} of {len(thr)} attempts")
    return out


def _peer(
    attempts: Sequence[Attempt],
    meta: Mapping[str, Any],
    geoms: list[tuple[str, float]],
    chain: list[Attempt],
    base: Attempt | None,
) -> list[str]:
    peer = meta.get("peer_torch_compile") or {}
    nv = nvbench_peer.NvbenchPeer.from_meta(meta)  # peer.nvbench: the engine's own benchmark of the baseline
    rows = []
    for g, w in geoms:
        p = peer.get(g) or {}
        if "error" in p:
            tc = f"error: {_short(p['error'], 80)}"
        elif isinstance(p.get("median_us"), (int, float)):
            tc = f"{p['median_us']:.2f} ({p.get('mode', DASH)})"
        else:
            tc = DASH
        times = [a.timings[g].median_us for a in chain if g in a.timings]
        best = min(times) if times else None
        ratio = f"{p['median_us'] / best:.3f}x" if best and isinstance(p.get("median_us"), (int, float)) else DASH
        base_us = base.timings[g].median_us if base and g in base.timings else None
        rows.append(
            [_gname(g, w), tc, _us(base_us), _us(best), ratio, *(nvbench_peer.cells(nv, g, best) if nv else [])]
        )
    head = ["Geometry", "torch.compile µs", "Baseline µs", "Best champion µs", "Champion vs torch.compile"]
    champion = chain[-1].id if chain else None
    # the kernel peers (peer.kernels): interleaved with the champion, each with its interval (evo/report/peer_log.py)
    kernels = peer_kernel_lines(meta, geoms, champion)
    if nv is None:
        return ["## Peer", "", *_table(head, rows), *kernels, ""]
    return ["## Peer", "", *_table([*head, *nvbench_peer.header()], rows), *kernels, "", *nvbench_peer.note(nv)]


def _steps(chain: list[Attempt], geoms: list[tuple[str, float]], meta: Mapping[str, Any] | None = None) -> list[str]:
    meta = meta or {}
    floor = meta.get(FLOOR_META)
    base = chain[0] if chain and chain[0].verdict.status == BASELINE else None
    rows = []
    known: list[str] = []  # suppressed sanitizer findings, with the argument the reviewer must read
    prev: Attempt | None = None
    for step, a in enumerate(chain):
        change = "baseline" if a.verdict.status == BASELINE else _change(a, prev.genome if prev else None)
        san = _step_sanitizer(a)
        for s in ((a.verdict.detail or {}).get("sanitizer") or {}).get("suppressed") or []:
            known.append(
                f"- step {step} (#{a.id}), {s.get('name')} ({s.get('tool')}): `{s.get('finding')}`. {s.get('argument')}"
            )
        for i, (g, w) in enumerate(geoms):
            t = a.timings.get(g)
            sp, sb = a.speedup_vs_parent.get(g), a.speedup_vs_baseline.get(g)
            roof = a.roofline_pct.get(g)
            fl = floor_us(floor, g)
            bt = base.timings.get(g) if base else None
            gname = _gname(g, w) + (" (latency-bound)" if latency_bound(fl, bt.median_us if bt else None) else "")
            mult = floor_multiple(t.median_us if t else None, fl)
            rows.append(
                [
                    step,
                    f"#{a.id}",
                    gname,
                    change,
                    _us(t.median_us if t else None) + (f" ({mult})" if mult else ""),
                    sp.fmt() if sp else DASH,
                    sb.fmt() if sb else DASH,
                    # the time as a multiple of the HBM floor for the bytes moved (copy ceiling = 1x)
                    f"{roof:.1f}% ({100.0 / roof:.2f}x floor)" if isinstance(roof, (int, float)) and roof > 0 else DASH,
                    san if i == 0 else "″",
                    _output(a, chain[0], g),
                ]
            )
        prev = a
    L = ["## Accepted steps", ""]
    if not chain:
        return L + ["No baseline or accepted attempt yet.", ""]
    if len(chain) == 1 and chain[0].verdict.status == BASELINE:
        L += ["No step accepted yet; the baseline is the champion.", ""]
    perf = ((meta.get("config") or {}).get("gates") or {}).get("perf") or {}
    if any(w == 0 for _, w in geoms):
        guard = perf.get("watched") or ("champion" if perf.get("watched_slack") else "baseline")
        L += [
            f"Watched geometries are guarded against the {guard} (gates.perf.watched); each watched row gives the "
            "step speedup (against the champion before it) and the speedup against the baseline.",
            "",
        ]
    fl_text = describe_floor(floor, meta.get("backend"))
    L += [
        f"{fl_text[:1].upper()}{fl_text[1:]}; a geometry whose floor is more than half its baseline time is marked "
        "latency-bound.",
        "",
    ]
    L += _table(
        [
            "Step",
            "Attempt",
            "Geometry",
            "Change",
            "Time µs",
            "Step speedup",
            "vs baseline",
            "% copy ceiling",
            "Sanitizer",
            "Output vs baseline",
        ],
        rows,
    ) + [""]
    if known:
        L += ["Sanitizer findings the family declares known (evo.family.SanitizerSuppression), with its argument:", ""]
        L += known + [""]
    return L


def _step_sanitizer(a: Attempt) -> str:
    """The step's sanitizer cell (gates/sanitizer.py): clean, known findings by name, or not sanitizer-checked."""
    if a.verdict.status == BASELINE:
        return "(the reference)"
    rec = (a.verdict.detail or {}).get("sanitizer")
    if not rec:
        return "not sanitizer-checked"
    sup = rec.get("suppressed") or []
    tools = [t for t, st in (rec.get("tools") or {}).items() if st in ("clean", "errors")]
    parts = []
    if tools:
        parts.append(
            f"{', '.join(tools)}: clean"
            if not sup
            else f"{', '.join(tools)}: clean but for known "
            + ", ".join(f"{x.get('name')} ({x.get('tool')})" for x in sup)
        )
    if rec.get("unchecked"):
        why = "; ".join(f"{t}: {w}" if t else w for t, w in rec["unchecked"].items())
        parts.append(f"not sanitizer-checked ({_short(why, 100)})")
    return "; ".join(parts) or "not sanitizer-checked"


def _ceiling_checks(meta: Mapping[str, Any]) -> list[str]:
    """evo/measure/ceiling.py: at the end of each run, the champion and the copy ceiling measured alternately."""
    checks = meta.get("ceiling_checks") or []
    if not checks:
        return []
    L = [
        "## Champion against the copy ceiling",
        "",
        'Measured side by side at the end of each run (the steps\' "% copy ceiling" divides by the ceiling measured '
        "once at the campaign's start):",
        "",
    ]
    for c in checks:
        sim = f" ({_label(meta)})" if c.get("simulated") else ""
        L.append(
            f"- {c.get('at', DASH)}, champion #{c.get('champion', DASH)} on the {c.get('backend', DASH)} backend"
            f"{sim}: {c.get('method', DASH)}"
        )
        L += [f"  - {line}" for line in ceiling_describe(c)]
    return L + [""]


def _output(a: Attempt, base: Attempt, g: str) -> str:
    """Bit-identical to the baseline (its frozen hashes), or how far it is from float64 (tolerance mode)."""
    if a is base or a.verdict.status == BASELINE:
        return "reference hashes"
    mine, ref = a.output_hashes.get(g), base.output_hashes.get(g)
    if mine and ref and mine == ref:
        return "bit-identical"
    errs = [
        v for k, v in (a.error_vs_ref.get(g) or {}).items() if k.endswith("rel_err") and isinstance(v, (int, float))
    ]
    if mine and ref:
        return f"tolerance: rel err {max(errs):.2e}" if errs else "tolerance"
    return DASH


def _decode_steps(chain: list[Attempt]) -> list[str]:
    """Per step: kernel speedup, the share-derived decode bound, the observed decode gain, and the residual."""
    steps = [a for a in chain if a.bound]
    if not steps:
        return []
    rows = []
    for i, a in enumerate(chain):
        b = a.bound
        if not b:
            continue
        obs = b.get("observed")
        resid = (obs - (b["bound"] - 1.0)) if isinstance(obs, (int, float)) else None
        rows.append(
            [
                i,
                f"#{a.id}",
                f"{b['kernel_speedup']:.3f}x ({b['geometry']})",
                f"{b['share']:.1%}",
                f"+{(b['bound'] - 1) * 100:.2f}%",
                f"{obs * 100:+.2f}%" if isinstance(obs, (int, float)) else DASH,
                f"{resid * 100:+.2f}%" if resid is not None else DASH,
                "yes" if b.get("claim") else "no: kernel-only",
            ]
        )
    last = steps[-1].bound
    assert last is not None  # only steps with a bound get here
    return (
        [
            "## Decode bound",
            "",
            f"Profile {last.get('profile', DASH)}; decode noise floor {last.get('decode_floor', 0):.2%}. "
            f"Cumulative kernel {last['cumulative_kernel']:.3f}x predicts at most "
            f"+{(last['predicted_decode'] - 1) * 100:.2f}% decode. Observed gains come only from a configured "
            "end-to-end command; none is shown where none ran.",
            "",
        ]
        + _table(
            ["Step", "Attempt", "Kernel speedup", "Share before", "Step bound", "Observed", "Residual", "E2E claim"],
            rows,
        )
        + [""]
    )


def _all(attempts: Sequence[Attempt], by_id: Mapping[int, Attempt], geoms: list[tuple[str, float]]) -> list[str]:
    """Every attempt; its change is against the champion it was measured against (``parent_id``), which is what its
    verdict compares it with; the proposer's own parents (a mutation's, a crossover's two) are in its origin."""
    first = next((g for g, w in geoms if w > 0), geoms[0][0] if geoms else None)
    rows = []
    for a in attempts:
        parent = by_id.get(a.parent_id) if a.parent_id is not None else None
        change = "baseline" if a.verdict.status == BASELINE else _change(a, parent.genome if parent else None)
        t = a.timings.get(first) if first else None
        roof = a.roofline_pct.get(first) if first else None
        rows.append(
            [
                f"#{a.id}",
                a.origin,
                f"#{a.parent_id}" if a.parent_id is not None and a.verdict.status != BASELINE else DASH,
                change,
                a.verdict.label(),
                a.verdict.reason,
                _num(a.score),
                _us(t.median_us if t else None),
                f"{roof:.1f}%" if isinstance(roof, (int, float)) else DASH,
                _first_resources(a),
                _num(a.compile_s, 2),
            ]
        )
    at = f" at {first}" if first else ""
    return [
        "## All attempts",
        "",
        f"Time and % of the copy ceiling{at} (the first weighted geometry); the change is against the champion each "
        "attempt was measured against, the champion then.",
        "",
        *_table(
            [
                "Id",
                "Origin",
                "Champion then",
                "Change vs champion then",
                "Verdict",
                "Reason",
                "Score",
                "µs",
                "% copy ceiling",
                "Regs/stack/spills",
                "Compile s",
            ],
            rows,
        ),
        "",
    ]


def rejected_ideas(attempts: Sequence[Attempt], meta: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Failed attempts grouped by the knob=value change they made vs their parent, most common first."""
    by_id = {a.id: a for a in attempts}
    base = _baseline(attempts, meta or {})
    groups: dict[str, dict[str, Any]] = {}
    for a in attempts:
        if a.verdict.status not in (REJECTED, ERROR) or a.verdict.kind == "interrupted":
            continue
        parent = (
            by_id.get(a.parent_id) if a.parent_id is not None else None
        ) or base  # an unknown parent: describe the change vs the baseline
        key = _delta(a, parent.genome if parent else None)
        g = groups.setdefault(key, {"change": key, "count": 0, "gates": Counter(), "reasons": [], "ids": []})
        g["count"] += 1
        g["gates"][a.verdict.label()] += 1
        g["ids"].append(a.id)
        r = _short(a.verdict.reason)
        if r and r not in g["reasons"] and len(g["reasons"]) < 3:
            g["reasons"].append(r)
    return sorted(groups.values(), key=lambda g: (-g["count"], g["change"]))


def _rejected(attempts: Sequence[Attempt], meta: Mapping[str, Any]) -> list[str]:
    L = [
        "## Rejected ideas",
        "",
        "These were tried and failed a gate; re-try them only if the hardware or the gates "
        "changed (`evo replay`, later).",
        "",
    ]
    groups = rejected_ideas(attempts, meta)
    if not groups:
        return L + ["None yet.", ""]
    rows = [
        [
            g["change"],
            g["count"],
            ", ".join(f"{k} ×{n}" for k, n in g["gates"].most_common()),
            " / ".join(g["reasons"]) or DASH,
            ", ".join(f"#{i}" for i in g["ids"]),
        ]
        for g in groups
    ]
    return (
        L + _table(["Change", "Attempts", "Gates", "Reasons", "Ids"], rows) + [""] + _rejected_sources(attempts, meta)
    )


def _rejected_sources(attempts: Sequence[Attempt], meta: Mapping[str, Any]) -> list[str]:
    """Source-level ideas (evo/search/ideas.py) that failed, with their titles and rationales, and failed outside
    answers."""
    book = book_from_meta(meta.get("ideas"))
    failed = [e for e in idea_events(attempts, meta) if e.verdict != "accepted"]
    if not failed:
        return []
    rows = []
    for e in failed:
        idea = book.get(e.slug) if e.slug else None
        if e.slug:
            title, why = (idea.title, idea.rationale) if idea else (e.slug, DASH)
        else:
            title, _, why = e.change.partition(": ")
        rows.append(
            [
                e.slug or "(outside answer)",
                _short(title, 100),
                _short(why or DASH, 240),
                e.verdict,
                _short(e.reason, 240),
                f"#{e.attempt}",
            ]
        )
    return (
        [
            "### Source-level ideas",
            "",
            "Patches that switched an idea on (or outside answers that never became one) and did not make it, "
            "with the idea's own rationale and the reason it was turned down.",
            "",
        ]
        + _table(["Idea", "Title", "Rationale", "Verdict", "Reason", "Id"], rows)
        + [""]
    )


def _selfcheck(meta: Mapping[str, Any]) -> list[str]:
    """`evo selfcheck`: the A/A acceptance check and the deliberate faults, when it was run."""
    sc = meta.get("selfcheck")
    if not sc:
        return []
    aa = sc.get("aa") or {}
    L = ["## Self-check", "", f"Run {sc.get('at', DASH)} on the {sc.get('backend', DASH)} backend.", ""]
    L.append(
        f"- A/A acceptance: {aa.get('accepted', DASH)} of {aa.get('evaluations', DASH)} perf-gate evaluations "
        f"of the baseline against a copy of itself accepted ({aa.get('rounds_each', DASH)} pairs each); highest "
        f"lower bound {_num(aa.get('max_lower_bound'), 4)} against a threshold of {_num(aa.get('threshold'), 4)}"
        f" (floor {_num((aa.get('floor') or 0) * 100, 3)}%)"
    )
    study = sc.get("study")  # since faults are recorded beside the campaign: that study's attempt numbers
    for title, v in (sc.get("faults") or {}).items():
        at = f" ({f'study {study}, ' if study else ''}attempt #{v['attempt']})" if "attempt" in v else ""
        ok = {True: "right verdict", False: f"WRONG: expected {v.get('expected')}", None: "needs a GPU"}.get(
            v.get("ok"), ""
        )
        L.append(
            f'- Fault "{_cell(title)}"{at}: {v.get("verdict", DASH)}'
            + (f" ({ok})" if ok else "")
            + f": {_cell(_short(v.get('reason', ''), 240))}"
        )
    return L + [""]


def _sanitizer(meta: Mapping[str, Any], chain: Sequence[Attempt]) -> list[str]:
    """compute-sanitizer over the champion (evo/measure/sanitize.py): per tool its status, count, first errors,
    command."""
    import shlex

    rec = meta.get("sanitizer")
    L = ["## Sanitizer", ""]
    if not isinstance(rec, Mapping) or not rec:
        why = (
            f"the campaign ran on the recorded backend ({_label(meta)}); compute-sanitizer needs a GPU"
            if meta.get("simulated")
            else "no pass recorded (`evo run` makes one on the GPU backend where compute-sanitizer is installed; "
            "`evo sanitize <config>` runs one on demand)"
        )
        return L + [f"Sanitizer not run: {why}.", ""]
    if "skipped" in rec:
        return L + [f"Sanitizer not run: {rec['skipped']} ({rec.get('at', DASH)}).", ""]
    aid, cid = rec.get("attempt_id"), rec.get("champion_id")
    who = f"attempt #{aid}" + (
        " (the champion)" if aid == cid else f" (champion then: #{cid})" if cid is not None else ""
    )
    if rec.get("fault"):
        who += f' with fault "{rec["fault"]}"'
    L.append(f"compute-sanitizer {rec.get('version') or DASH} on {who}, {rec.get('at', DASH)}.")
    if chain and aid is not None and chain[-1].id != aid and aid == cid:
        L.append(f"The champion is now #{chain[-1].id}; this pass checked #{aid} (`evo sanitize` checks the new one).")
    if rec.get("source_matches") is False:
        L.append("The source built for it differs from the one measured (kernel.cu or an idea changed since).")
    L.append("")
    for tool, r in (rec.get("tools") or {}).items():
        r = r or {}
        count = r.get("count")
        n = f"{count} error(s), " if count is not None and r.get("status") in ("clean", "errors") else ""
        if r.get("warnings"):
            n += f"{r['warnings']} warning(s), "
        line = f"- {tool}: **{r.get('status', DASH)}**, {n}{_num(r.get('duration_s'), 1)} s"
        if r.get("status") != "clean" and r.get("reason"):
            line += f": {_short(r['reason'], 300)}"
        L.append(line)
        L += [f"  - `{_short(e, 300).replace(chr(96), chr(39))}`" for e in r.get("errors") or []]
        if r.get("argv"):
            L.append(f"  - command: `{shlex.join(str(a) for a in r['argv'])}`")
    return L + [""]


def _ablation(meta: Mapping[str, Any], chain: Sequence[Attempt]) -> list[str]:
    """`evo ablate` of the champion (evo/loop/ablate.py, evo/report/ablation.py): which of its changes carry the
    gain, or how to get that."""
    from evo.report.ablation import latest, table

    champ = chain[-1] if chain else None
    L = ["## Ablation", ""]
    if champ is None or len(chain) < 2:
        return []
    rec = latest(meta, champ.id)
    if rec is None:
        older = [r for r in meta.get("ablations") or [] if isinstance(r, Mapping)]
        said = f" (the last one ablated #{older[-1].get('champion')})" if older else ""
        return L + [
            f"Champion #{champ.id} not ablated{said}: `evo ablate <config>` measures which changes carry it.",
            "",
        ]
    sim = f" ({_label(meta)})" if rec.get("simulated") else ""
    L += [
        f"Champion #{champ.id} with each of its changes against baseline #{rec.get('baseline')} set back alone, "
        f"{rec.get('at', DASH)}, {rec.get('backend', DASH)} backend{sim}. Method: {rec.get('method', DASH)}.",
        "",
    ]
    return L + table(rec)


def render_log(attempts: list[Attempt], meta: dict, plot: str | None = None) -> str:
    """The whole markdown log of a campaign; ``plot`` names the convergence PNG beside it ("" = none made)."""
    meta = meta or {}
    attempts = sorted(attempts, key=lambda a: a.id)
    cfg = meta.get("config") or {}
    campaign = cfg.get("campaign") or (attempts[0].campaign if attempts else DASH)
    family = cfg.get("family") or (attempts[0].family if attempts else DASH)
    geoms = _geometries(attempts, meta)
    base = _baseline(attempts, meta)
    chain = champion_chain(attempts, meta)
    by_id = {a.id: a for a in attempts}

    L = [f"# Attempt log: {campaign} ({family})", ""]
    if meta.get("simulated"):
        label = _label(meta)
        # (a replay of another tool's recorded measurements says whose: harness/ktcache.py's label)
        L += [SIMULATED_BANNER if label == SIMULATED_LABEL else f"**{label[0].upper()}{label[1:]}** (replayed)", ""]
    L += _setup(attempts, meta, geoms, base)
    L += _peer(attempts, meta, geoms, chain, base)
    conv = convergence(attempts)
    note = [f"**{conv.note()}.**", ""] if conv is not None and conv.converged else []
    if plot is not None or note:
        L += ["## Convergence", "", *note]
    if plot is not None:
        L += [
            f"![Convergence: champion against attempts]({plot})"
            if plot
            else "(convergence plot skipped: matplotlib is not installed)",
            "",
        ]
    L += _steps(chain, geoms, meta)
    L += finish_section(attempts, meta, dict(geoms))  # evo/report/finish_log.py
    L += _ceiling_checks(meta)
    L += _decode_steps(chain)
    L += ["## Verdicts", ""]
    counts = _verdict_counts(attempts)
    L += (_table(["Verdict", "Count"], counts) if counts else ["No attempts recorded yet."]) + [""]
    L += _selfcheck(meta)
    L += _sanitizer(meta, chain)
    L += _ablation(meta, chain)
    L += _all(attempts, by_id, geoms)
    L += _rejected(attempts, meta)
    return "\n".join(L).rstrip() + "\n"


def convergence_plot(attempts: Sequence[Attempt], meta: Mapping[str, Any], path: Path) -> Path | None:
    """Best accepted score (weighted geometric-mean speedup vs baseline) against attempts, as a PNG; accepted,
    rejected-after-a-full-measurement and early-stopped attempts are marked apart (:func:`plot_kind`).

    Returns None where matplotlib is missing: the log then says so instead of embedding the plot.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    attempts = sorted(attempts, key=lambda a: a.id)
    xs, best, cur = [], [], 1.0
    for i, a in enumerate(attempts):
        if a.verdict.status == ACCEPTED and a.score is not None:
            cur = a.score
        xs.append(i)
        best.append(cur)
    points: dict[str, list[tuple[int, float]]] = {}
    for i, a in enumerate(attempts):
        kind = plot_kind(a)
        if kind is not None and a.score is not None:
            points.setdefault(kind, []).append((i, a.score))
    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=110)
    styles: dict[str, dict[str, Any]] = {  # early-stopped scores cover only the geometries reached: faint
        STOPPED_EARLY: {"marker": "v", "s": 8, "facecolors": "none", "edgecolors": "0.75", "linewidths": 0.6},
        MEASURED_IN_FULL: {"marker": "x", "s": 10, "c": "0.45", "linewidths": 0.8},
        ACCEPTED: {"marker": "o", "s": 16, "c": "C0", "zorder": 3},
        BASELINE: {"marker": "s", "s": 16, "c": "C2", "zorder": 3},
    }
    for kind, label, _ in legend(attempts):  # counted as evo status counts (evo/report/plot_legend.py)
        pts = points[kind]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], label=label, **styles[kind])
    ax.step(xs, best, where="post", color="C0", label="champion")
    rest = unplotted(attempts)
    if rest:
        ax.plot([], [], " ", label=rest)  # a legend line with no mark: the attempts that have no point
    ax.set_xlabel("attempt")
    ax.set_ylabel("speedup vs baseline (weighted geomean)")
    title = f"{(meta.get('config') or {}).get('campaign', '')}"
    if meta.get("simulated"):
        title += f" — {_label(meta)}"
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    # under the axes, not over the points: with every class and its reason it is several lines long
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.16), frameon=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return path


def write_log(attempts: list[Attempt], meta: dict, path: Path) -> Path:
    """Write :func:`render_log` to ``path`` (atomically, so a reader never sees half a log), with its plot."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    png = convergence_plot(attempts, meta, path.with_name("convergence.png")) if attempts else None
    text = render_log(attempts, meta, plot=png.name if png else ("" if attempts else None))
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    except BaseException:  # a full disk or a stop: no half-written temporary file is left beside the log
        tmp.unlink(missing_ok=True)
        raise
    return path


def render_status(attempts: list[Attempt], meta: dict) -> str:
    """A short plain-text summary for `evo status`."""
    meta = meta or {}
    attempts = sorted(attempts, key=lambda a: a.id)
    cfg = meta.get("config") or {}
    backend = meta.get("backend") or cfg.get("backend") or DASH
    if meta.get("simulated"):
        backend += f" ({_label(meta)})"
    counts = _verdict_counts(attempts)
    chain = champion_chain(attempts, meta)
    base = _baseline(attempts, meta)
    L = [
        f"campaign: {cfg.get('campaign') or (attempts[0].campaign if attempts else DASH)}",
        f"family:   {cfg.get('family') or (attempts[0].family if attempts else DASH)}",
        f"backend:  {backend}",
        *([f"searched: {'; '.join(cfg['searched_knobs'])}"] if cfg.get("searched_knobs") else []),
        f"attempts: {len(attempts)} recorded",
        "verdicts: " + (", ".join(f"{k} {n}" for k, n in counts) or DASH),
    ]
    if chain:
        champ = chain[-1]
        what = "baseline" if champ is base else _change(champ, base.genome if base else None)
        L.append(f"champion: #{champ.id} ({what})")
    else:
        L.append(f"champion: {DASH}")
    best: dict[str, Any] = {}
    for a in chain:
        for g, iv in a.speedup_vs_baseline.items():
            if g not in best or iv.value > best[g][1].value:
                best[g] = (a.id, iv)
    if best:
        L.append("best speedup vs baseline:")
        weights = dict(_geometries(attempts, meta))
        L += [f"  {_gname(g, weights.get(g, 1.0))}: {iv.fmt()} (#{i})" for g, (i, iv) in best.items()]
    L.append(f"elapsed:  {_elapsed(meta.get('elapsed_s'))}")
    conv = convergence(attempts)
    if conv is not None and conv.converged:
        L.append(conv.note())
    return "\n".join(L) + "\n"
