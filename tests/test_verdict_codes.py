"""Typed outcomes: decisions read ``Verdict.code`` and ``Verdict.detail``, never the words of a reason.

The main check renames every reason string (each Verdict built while it runs gets a digest of its reason instead)
and runs recorded campaigns again: the same attempts, with the same verdict codes, and the same champion. The
scenarios cover each decision that used to read a reason: the exact-mode tabu (evolutionary proposer), the
surrogate's exact-mode detection (the shipped config), and the early-stop override, which must keep a physics
verdict (a copy ceiling that one geometry exceeds). The surrogate's identical-SASS skip is checked on a history.
"""

from __future__ import annotations

import ast
import dataclasses
import gzip
import hashlib
import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from evo.config import load_config
from evo.core.genome import Genome
from evo.core.records import ACCEPTED, BASELINE, ERROR, REJECTED, Attempt, Code, Verdict, legacy_code, verdict_from_dict
from evo.ledger.ledger import Ledger
from evo.loop.campaign import Campaign
from evo.search import PROPOSERS
from gates.correctness import CorrectnessEvidence, correctness_gate
from gates.static import identical_sass
from tests.test_campaign import write_config

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [
    p
    for d in ("evo", "gates", "harness", "candidates")
    for p in sorted((ROOT / d).rglob("*.py"))
    if "templates" not in p.relative_to(ROOT).parts
] + sorted((ROOT / "tools").glob("*.py"))
ATTEMPTS = 40
RENAMED = "renamed "


def rename(reason: str) -> str:
    """Another text for every reason, the same for the same reason: no word of the original survives."""
    return RENAMED + hashlib.sha256(reason.encode()).hexdigest()[:16]


@pytest.fixture(scope="module")
def cache_env(tmp_path_factory):
    d = os.environ.get("EVO_TEST_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cubin-cache"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EVO_CACHE_DIR", d)
        yield d


def renaming(mp: pytest.MonkeyPatch) -> None:
    """From now on every Verdict built (gates, campaign, ledger reads, dataclasses.replace) carries a renamed reason."""
    init = Verdict.__init__

    def renamed_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        object.__setattr__(self, "reason", rename(self.reason))

    mp.setattr(Verdict, "__init__", renamed_init)


SCENARIOS = {
    # the shipped config (surrogate, exact mode, which the surrogate is told): no inexact genome is proposed
    "shipped": {"proposer": None, "strict_ceiling": None},
    # evolutionary in exact mode: only the tabu keeps split_reduce=warp from coming back
    "tabu": {"proposer": "evolutionary", "strict_ceiling": None},
    # T4096_H4096 moves 1.2x the bytes it does: fast candidates there break the copy ceiling (physics) while being
    # stopped early at T4096_H7168, where the override must keep the physics verdict
    # (rule every: under rule weighted the early-out waits for the last weighted geometry and judges the mean)
    # (the proposer's trajectory pinned, not the shipped default, which selections move)
    "physics": {"proposer": None, "strict_ceiling": ("T4096_H4096", 1.2), "rule": "every", "options": "{ordinal: 1.0}"},
}


def _campaign(tmp: Path, scenario: str, renamed: bool):
    s = SCENARIOS[scenario]
    path = write_config(tmp, ATTEMPTS, name=f"{scenario}-{'renamed' if renamed else 'plain'}")
    if s["proposer"]:
        text = path.read_text()
        assert "name: surrogate" in text, "the shipped config no longer names its proposer so"
        path.write_text(text.replace("name: surrogate", f"name: {s['proposer']}"))
    if s.get("options"):
        text = path.read_text()
        assert "  options: {}" in text, "the shipped config no longer gives its proposer no options"
        path.write_text(text.replace("  options: {}", f"  options: {s['options']}"))
    if s.get("rule"):
        text = path.read_text()
        assert "rule: weighted" in text, "the shipped config no longer takes rule weighted"
        path.write_text(text.replace("rule: weighted", f"rule: {s['rule']}"))
    with pytest.MonkeyPatch.context() as mp:
        if renamed:
            renaming(mp)
        cfg = load_config(path)
        if s["strict_ceiling"]:
            geo, factor = s["strict_ceiling"]
            fam_cls = type(cfg.family)
            moved = fam_cls.bytes_moved
            mp.setattr(fam_cls, "bytes_moved", lambda self, g: int(moved(self, g) * (factor if g.name == geo else 1)))
        camp = Campaign(cfg, out=lambda s: None, command="pytest")
        summary = camp.run()
        atts = camp.ledger.attempts()
        # a new process resumes from the ledger alone: the tabu it reads back (through Attempt.from_json)
        again = Campaign(load_config(path), out=lambda s: None, command="pytest").tabu()
    return atts, summary.champion, again


@pytest.fixture(scope="module")
def runs(tmp_path_factory, cache_env):
    out = {}
    for scenario in SCENARIOS:
        tmp = tmp_path_factory.mktemp(scenario)
        out[scenario] = (_campaign(tmp, scenario, False), _campaign(tmp, scenario, True))
    return out


def _trace(atts: list[Attempt]) -> list[tuple]:
    return [
        (
            a.id,
            a.genome_key,
            a.verdict.status,
            a.verdict.gate,
            a.verdict.kind,
            a.verdict.code,
            a.verdict.detail,
            a.score,
            a.parent_id,
        )
        for a in atts
    ]


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_renaming_every_reason_changes_no_decision(runs, scenario):
    (plain, plain_champ, plain_tabu), (renamed, renamed_champ, renamed_tabu) = runs[scenario]
    assert len(plain) == ATTEMPTS
    # the renaming took: no reason of the renamed run is a reason of the plain one
    assert all(a.verdict.reason.startswith(RENAMED) for a in renamed)
    assert not any(a.verdict.reason.startswith(RENAMED) for a in plain)
    assert _trace(renamed) == _trace(plain)
    assert renamed_champ is not None and plain_champ is not None
    assert (renamed_champ.id, renamed_champ.genome_key) == (plain_champ.id, plain_champ.genome_key)
    assert renamed_tabu == plain_tabu
    assert all(a.verdict.code is not Code.UNSPECIFIED for a in plain)


def test_the_scenarios_exercise_each_decision(runs):
    """Not vacuous: each scenario reaches the decision it is there for."""
    (atts, _, tabu), _ = runs["tabu"]
    inexact = [a for a in atts if a.verdict.code is Code.CORRECTNESS_INEXACT_KNOB]
    assert inexact
    assert inexact[0].verdict.detail == {"knobs": ["split_reduce"], "geometry": "T1_H4096_S32"}
    assert tabu == {"split_reduce": ["warp"]}
    assert all(a.genome["split_reduce"] == "serial" for a in atts if a.id > inexact[0].id)
    (atts, _, tabu), _ = runs["shipped"]
    assert tabu == {} and all(a.genome["split_reduce"] == "serial" for a in atts)
    (atts, _, _), _ = runs["physics"]
    both = [
        a
        for a in atts
        if a.verdict.code is Code.PERF_PHYSICS and any("(stopped early)" in t.method for t in a.timings.values())
    ]
    assert both, "the strict ceiling gives an attempt that is both over the ceiling and stopped early"
    assert all(a.verdict.detail["geometry"] == "T4096_H4096" for a in both)
    early = [a for a in atts if a.verdict.code is Code.PERF_EARLY_STOP]
    assert early and all(set(a.verdict.detail) == {"geometry", "after"} for a in early)


def test_proposers_read_codes_not_reasons(runs, tmp_path):
    """Every proposer proposes the same from a history whose reasons are renamed; the surrogate's view of it (the
    correctness mode shown, the failures it counts, identical SASS not among them) is the same."""
    (atts, _, _), _ = runs["tabu"]  # a history with an exact-mode rejection in it
    cfg = load_config(write_config(tmp_path, 5))
    fam, geos = cfg.family, cfg.geometries
    twin = PROPOSERS["surrogate"](fam, geos, {}, 1).propose(atts, {a.genome_key for a in atts}).genome
    history = atts + [
        Attempt(len(atts), "c", fam.name, dict(twin), twin.key, "x", verdict=identical_sass("d", {"d": 3}))
    ]
    renamed_history = [
        dataclasses.replace(a, verdict=dataclasses.replace(a.verdict, reason=rename(a.verdict.reason))) for a in history
    ]
    sur = PROPOSERS["surrogate"](fam, geos, {}, 0)
    plain_data, renamed_data = sur._data(history), sur._data(renamed_history)
    assert plain_data == renamed_data
    assert plain_data[3] == "exact" and sur.code(twin) is not None and sur.code(twin) not in plain_data[1]
    for name, cls in PROPOSERS.items():
        got = []
        for h in (history, renamed_history):
            p = cls(fam, geos, {}, 7)
            h = list(h)
            seen = {a.genome_key for a in h}
            keys = []
            for _ in range(3):
                prop = p.propose(h, seen)
                assert prop is not None, name
                keys.append(prop.genome.key)
                seen.add(prop.genome.key)
                h.append(
                    Attempt(
                        len(h),
                        "c",
                        fam.name,
                        dict(prop.genome),
                        prop.genome.key,
                        prop.origin,
                        verdict=Verdict.rejected("perf", "x", Code.PERF_SLOWER),
                        score=0.9,
                    )
                )
            got.append(keys)
        assert got[0] == got[1], name


# --- the code list -----------------------------------------------------------------------------------------------


def _calls(tree: ast.AST, attr: str | None):
    """Calls of ``Verdict(...)`` (attr None) or ``Verdict.<attr>(...)``."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        plain = attr is None and isinstance(f, ast.Name) and f.id == "Verdict"
        method = (
            attr is not None
            and isinstance(f, ast.Attribute)
            and f.attr == attr
            and isinstance(f.value, ast.Name)
            and f.value.id == "Verdict"
        )
        if plain or method:
            yield node


def _trees():
    return [(p, ast.parse(p.read_text(), str(p))) for p in SOURCES]


# Codes no source line names, and why.
DOCUMENTED = {
    Code.UNSPECIFIED: "a verdict built without a code (test fixtures) or an old record legacy_code does not know",
}


def _harness_errors() -> list[type]:
    """Every HarnessError subclass of the code: the loop records each as ``Verdict.error(e.kind, ...)``."""
    import importlib

    from harness.errors import HarnessError

    for mod in ("harness.build", "harness.gpu", "harness.recorded", "harness.worker", "evo.search.ideas"):
        importlib.import_module(mod)
    out, todo = [], [HarnessError]
    while todo:
        c = todo.pop()
        out.append(c)
        todo += c.__subclasses__()
    return [c for c in out if c.__module__.split(".")[0] in ("harness", "evo")]


def test_every_code_is_produced_somewhere_or_documented():
    named: set[str] = set()
    kinds: set[str] = set()
    for p, tree in _trees():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "Code"
                and p.name != "records.py"
            ):
                named.add(node.attr)
        for call in _calls(tree, "error"):
            first = call.args[0] if call.args else next(k.value for k in call.keywords if k.arg == "kind")
            kinds |= {c.value for c in ast.walk(first) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    kinds |= {e.kind for e in _harness_errors()}  # the harness's errors name their kinds (harness/errors.py)
    named.add("PASS")  # gates return records.PASS
    if any(next(_calls(tree, "accepted"), None) for _, tree in _trees()):
        named.add("PERF_ACCEPTED")  # what Verdict.accepted says
    produced = {Code[n] for n in named if n in Code.__members__} | {Code(f"error.{k}") for k in kinds}
    missing = set(Code) - produced - set(DOCUMENTED)
    assert not missing, f"codes nothing produces and nothing documents: {sorted(c.value for c in missing)}"
    assert not (set(DOCUMENTED) & produced), "a documented-only code is produced after all: drop it from DOCUMENTED"
    assert {c.value.split(".", 1)[1] for c in Code if c.gate == "error"} >= kinds, "an error kind without a code"


def test_every_verdict_built_in_the_code_says_its_code():
    """``Verdict.rejected`` with a code, ``Verdict(...)`` with ``code=``; ``accepted`` and ``error`` set theirs."""
    bad = []
    for p, tree in _trees():
        for call in _calls(tree, "rejected"):
            if len(call.args) < 3 and not any(k.arg == "code" for k in call.keywords):
                bad.append(f"{p.relative_to(ROOT)}:{call.lineno}")
        for call in _calls(tree, None):
            if not any(k.arg in ("code", None) for k in call.keywords) and len(call.args) < 5:
                bad.append(f"{p.relative_to(ROOT)}:{call.lineno}")
    assert not bad, bad


def _reads_reason(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "reason") or (
        isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == "reason"
    )


def test_no_decision_compares_reason_text():
    """No comparison, ``in`` test or string method (startswith, split, ...) on a verdict's reason outside
    ``evo.core.records.legacy_code``, which reads old records once."""
    bad = []
    for p, tree in _trees():
        for node in ast.walk(tree):
            hit = False
            if isinstance(node, ast.Compare):
                hit = any(_reads_reason(n) for n in [node.left, *node.comparators])
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                hit = node.func.attr in (
                    "startswith",
                    "endswith",
                    "split",
                    "find",
                    "index",
                    "count",
                    "partition",
                    "rsplit",
                    "rfind",
                ) and _reads_reason(node.func.value)
            if hit:
                bad.append(f"{p.relative_to(ROOT)}:{node.lineno}")
    assert not bad, bad


# --- JSON, the ledger, old records ---------------------------------------------------------------------------------


def _inexact() -> Verdict:
    return correctness_gate(CorrectnessEvidence(), {}, "exact", {"T1_H4096_S32": ["split_reduce"]})


def test_json_and_ledger_round_trip_keep_code_and_detail(tmp_path):
    fam = load_config(write_config(tmp_path, 5)).family
    led = Ledger(f"sqlite:///{tmp_path / 'l.db'}", "c", fam.knobs)
    v = _inexact()
    assert v.code is Code.CORRECTNESS_INEXACT_KNOB and v.detail == {
        "knobs": ["split_reduce"],
        "geometry": "T1_H4096_S32",
    }
    t = led.ask({**fam.baseline(), "split_reduce": "warp"})
    g = Genome(t.params)
    a = Attempt(t.number, "c", fam.name, dict(g), g.key, "x", verdict=v)
    doc = json.loads(a.to_json())
    assert doc["verdict"]["code"] == "correctness.inexact_knob"
    assert doc["verdict"]["detail"]["knobs"] == ["split_reduce"]
    assert Attempt.from_json(a.to_json()) == a
    led.record(t, a)
    (back,) = Ledger(f"sqlite:///{tmp_path / 'l.db'}", "c", fam.knobs).attempts()
    assert back.verdict == v and back.verdict.code is Code.CORRECTNESS_INEXACT_KNOB
    assert back.verdict.detail == v.detail and back.verdict.reason == v.reason


def test_verdicts_keep_their_reason_and_their_gate():
    v = _inexact()
    assert v.reason == (
        "split_reduce changes the summation order at T1_H4096_S32; the campaign runs in exact mode "
        "(use gates.correctness.mode: tolerance)"
    )
    assert v.label() == "rejected: correctness" and Code.CORRECTNESS_INEXACT_KNOB.gate == "correctness"
    assert Verdict.error("timeout", "t").code is Code.ERROR_TIMEOUT
    assert Verdict.accepted("a").code is Code.PERF_ACCEPTED and Verdict(BASELINE).code is Code.BASELINE
    assert Verdict.rejected("perf", "no code").code is Code.UNSPECIFIED
    with pytest.raises(ValueError, match="gate"):
        Verdict.rejected("static", "x", Code.PERF_SLOWER)


OLD = [  # (status, gate, kind, reason as the gates wrote it before codes) -> (code, detail)
    (
        ACCEPTED,
        "perf",
        None,
        "faster than the champion: T4096_H4096 1.2x [1.1, 1.3] (needs > 1.01)",
        Code.PERF_ACCEPTED,
        {},
    ),
    (BASELINE, None, None, "the portable baseline; its output hashes are frozen as the reference", Code.BASELINE, {}),
    (ERROR, "static", "compile", 'compile error: kernel.cu(3): error: expected a ";"', Code.ERROR_COMPILE, {}),
    (ERROR, None, "interrupted", "the campaign process stopped", Code.ERROR_INTERRUPTED, {}),
    (
        REJECTED,
        "correctness",
        None,
        (
            "split_reduce, block changes the summation order at T1_H4096_S32; the campaign "
            "runs in exact mode (use gates.correctness.mode: tolerance)"
        ),
        Code.CORRECTNESS_INEXACT_KNOB,
        {"knobs": ["split_reduce", "block"], "geometry": "T1_H4096_S32"},
    ),
    (
        REJECTED,
        "correctness",
        None,
        "3 NaN/Inf values in post_mix at T4096_H4096 seed 1",
        Code.CORRECTNESS_NONFINITE,
        {},
    ),
    (
        REJECTED,
        "correctness",
        None,
        "9 elements of layer_input at T4096_H4096 seed 0 never written (poison left)",
        Code.CORRECTNESS_UNWRITTEN,
        {},
    ),
    (
        REJECTED,
        "correctness",
        None,
        ("error vs float64 of y at in4096_out4096_bf16 seed 0 is 1.2e-03, over 2x the baseline's 3.1e-04"),
        Code.CORRECTNESS_TOLERANCE,
        {},
    ),
    (
        REJECTED,
        "correctness",
        None,
        ("hash of layer_input at T4096_H4096 seed 0 differs from the baseline: 3 of 9 elements differ"),
        Code.CORRECTNESS_HASH,
        {},
    ),
    (
        REJECTED,
        "correctness",
        None,
        "hash of y at g seed 0 differs and no float64 error is known",
        Code.CORRECTNESS_NO_FLOAT64,
        {},
    ),
    (
        REJECTED,
        "correctness",
        None,
        ("race: the hash of layer_input at T4096_H4096 seed 1 moved between 2 runs on the same input"),
        Code.CORRECTNESS_RACE,
        {},
    ),
    (
        REJECTED,
        "correctness",
        None,
        ("wrote past the bounds of layer_input at T4096_H4096 seed 0: 16 guard-band bytes overwritten"),
        Code.CORRECTNESS_OOB,
        {},
    ),
    (REJECTED, "correctness", None, "after timing: the output hash moved", Code.CORRECTNESS_RECHECK, {}),
    (
        REJECTED,
        "perf",
        None,
        "not faster at T4096_H7168: 0.999x [0.992, 1.004] vs champion, lower bound under 1.0131",
        Code.PERF_NOT_FASTER,
        {"geometry": "T4096_H7168"},
    ),
    (
        REJECTED,
        "perf",
        None,
        "weighted speedup 1.001x [0.99, 1.01] vs champion, lower bound under 1.0131",
        Code.PERF_NOT_FASTER,
        {},
    ),
    (
        REJECTED,
        "perf",
        None,
        "slower at in4096_out4096: 0.97x [0.96, 0.98] vs champion (beyond the 0.30% noise band)",
        Code.PERF_SLOWER,
        {"geometry": "in4096_out4096"},
    ),
    (
        REJECTED,
        "perf",
        None,
        ("slower at in4096_out4096: 0.97x [0.96, 0.98] vs champion (beyond the watched slack of 2.00%)"),
        Code.PERF_WATCHED,
        {"geometry": "in4096_out4096"},
    ),
    (
        REJECTED,
        "perf",
        None,
        (
            "slower than the baseline at in4096_out4096: 0.97x [0.96, 0.98] (beyond the 0.30% noise "
            "band; a watched geometry's slack is against the champion only)"
        ),
        Code.PERF_WATCHED_BASELINE,
        {"geometry": "in4096_out4096"},
    ),
    (
        REJECTED,
        "perf",
        None,
        (
            "slower than the champion at T4096_H4096 in all of the first 6 pairs (0.420x [0.418, "
            "0.422]); stopped early, geometries after it not measured"
        ),
        Code.PERF_EARLY_STOP,
        {"geometry": "T4096_H4096", "after": 6},
    ),
    (
        REJECTED,
        "perf",
        None,
        (
            "physics: 30.00 µs at T4096_H4096 implies 130% of the measured copy ceiling "
            "(measurement error or skipped work)"
        ),
        Code.PERF_PHYSICS,
        {"geometry": "T4096_H4096"},
    ),
    (
        REJECTED,
        "perf",
        None,
        "only 2 unthrottled pairs at T4096_H4096 (10 discarded)",
        Code.PERF_TOO_FEW_PAIRS,
        {"geometry": "T4096_H4096"},
    ),
    (REJECTED, "perf", None, "no samples", Code.PERF_NO_SAMPLES, {}),
    (REJECTED, "static", None, "300 registers > limit 255", Code.STATIC_REGISTERS, {}),
    (
        REJECTED,
        "static",
        None,
        "spills 8 B stored / 8 B loaded; baseline spills 0/0 B (in=4096)",
        Code.STATIC_SPILLS,
        {},
    ),
    (REJECTED, "static", None, "96-byte stack frame; baseline has 0 (S=1,prenorm=0)", Code.STATIC_STACK, {}),
    (
        REJECTED,
        "static",
        None,
        "identical SASS to attempt #12: same machine code, not measured again",
        Code.STATIC_IDENTICAL_SASS,
        {"attempt": 12},
    ),
    (REJECTED, "e2e", None, "token stream changed: sha256 0123… != frozen 4567…", Code.E2E_TOKENS, {}),
    (REJECTED, "perf", None, "a reason no rule knows", Code.UNSPECIFIED, {}),
]


@pytest.mark.parametrize("status,gate,kind,reason,code,detail", OLD)
def test_old_records_get_their_code_once_when_read(status, gate, kind, reason, code, detail):
    assert legacy_code(status, gate, kind, reason) == (code, detail)
    v = verdict_from_dict({"status": status, "gate": gate, "kind": kind, "reason": reason})
    assert (v.code, v.detail, v.reason) == (code, detail, reason)
    # a record with a code is taken as it is: its reason is never read
    v = verdict_from_dict(
        {"status": status, "gate": gate, "kind": kind, "reason": "anything", "code": code.value, "detail": {"x": 1}}
    )
    assert (v.code, v.detail) == (code, {"x": 1})


def _committed_ledgers() -> list[Path]:
    out = []
    for d in ("logs", "benchmarks"):
        out += [p for p in (ROOT / d).rglob("ledger.db.gz")] if (ROOT / d).is_dir() else []
    return sorted(out)


def _old_attempts(path: Path, tmp: Path) -> list[tuple[dict, Attempt]]:
    db = tmp / "old.db"
    with gzip.open(path) as src, open(db, "wb") as dst:
        shutil.copyfileobj(src, dst)
    con = sqlite3.connect(db)
    try:
        rows = con.execute("select value_json from trial_user_attributes where key = 'attempt'").fetchall()
    finally:
        con.close()
    return [(json.loads(json.loads(v))["verdict"], Attempt.from_json(json.loads(v))) for (v,) in rows]


def test_every_committed_old_record_gets_a_code(tmp_path):
    """The committed ledgers' records written before codes (later ledgers, e.g. 2026-12-04's, carry their own):
    every such attempt maps to a code, and where the old reason-reading tabu found knobs the code's detail names the
    same ones."""
    ledgers = _committed_ledgers()
    if not ledgers:
        pytest.skip("no committed ledger.db.gz under logs/ or benchmarks/")
    n = 0
    for path in ledgers:
        for raw, a in _old_attempts(path, tmp_path):
            if "code" in raw:
                assert a.verdict.code.value == raw["code"], (str(path), raw)  # a code is taken as written
                continue
            n += 1
            assert a.verdict.code is not Code.UNSPECIFIED, (str(path), raw)
            # what the tabu read out of the reason before codes
            old = " changes the summation order"
            was_inexact = raw.get("gate") == "correctness" and old in raw["reason"]
            old_knobs = raw["reason"].split(old)[0].split(", ") if was_inexact else None
            new_knobs = a.verdict.detail.get("knobs") if a.verdict.code is Code.CORRECTNESS_INEXACT_KNOB else None
            assert new_knobs == old_knobs, raw
    assert n > 0
