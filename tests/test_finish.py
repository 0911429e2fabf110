"""The finish (evo/loop/finish.py) on the recorded backend: the example family's committed H200 sweep
(examples/fused_add_rmsnorm/recorded), three weighted geometries whose A/A floor is 0.181% (a finish step needs
> 1.0054, a search step > 1.0100), driven by a scripted proposer so that the campaign's champion and near misses are
known: block 1024 / cache 4 / all_warps with vec 2 is the champion, vec 8 measures 1.009x [1.008, 1.012] against it
(turned down by the 1% step, over the A/A-justified bound); with vec 4 the champion's single-knob gains block 512
(1.001x) and vec 8 (1.006x [1.005, ...]) are each too small, and the two together measure 1.037x."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from evo.config import ConfigError, load_config
from evo.core.finish_record import END, FINISH_META, NEAR, PAIR, STALL, finish_runs
from evo.core.records import ACCEPTED, Code
from evo.ledger.memory_ledger import MemoryLedger
from evo.loop.campaign import Campaign
from evo.loop.finish import due
from evo.loop.seams import make_backend
from evo.report.logmd import render_log
from evo.search.base import Proposal, Proposer
from harness.build import Builder

ROOT = Path(__file__).resolve().parent.parent
CHAMP = {"block": 1024, "cache": 4, "reduce": "all_warps", "vec": 2}
NEAR_MISS = {"block": 1024, "cache": 4, "reduce": "all_warps", "vec": 8}  # 1.009x [1.008, 1.012] against CHAMP
CHAMP4 = {"block": 1024, "cache": 4, "reduce": "all_warps", "vec": 4}
GAIN_BLOCK = {"block": 512, "cache": 4, "reduce": "all_warps", "vec": 4}  # 1.001x against CHAMP4
GAIN_VEC = {"block": 1024, "cache": 4, "reduce": "all_warps", "vec": 8}  # 1.006x [1.005, ...] against CHAMP4
BOTH = {"block": 512, "cache": 4, "reduce": "all_warps", "vec": 8}  # 1.037x against CHAMP4


class Scripted(Proposer):
    """Proposes the given genomes in order (each once), then nothing: the search space as the test wants it."""

    def __init__(self, family, genomes):
        super().__init__(family, [], {}, 0)
        self.todo = [family.genome(g) for g in genomes]

    def propose(self, attempts, seen):
        return next((Proposal(g, "scripted") for g in self.todo if g.key not in seen), None)


class Spy:
    """The recorded backend, remembering the rounds each measurement asked for."""

    def __init__(self, inner):
        self.inner, self.name, self.simulated, self.rounds = inner, inner.name, True, []

    def __getattr__(self, k):
        return getattr(self.inner, k)

    def measure(self, parts, g, rounds, *args, **kw):
        self.rounds.append((tuple(label for label, _ in parts), rounds))
        return self.inner.measure(parts, g, rounds, *args, **kw)


def _config(tmp_path: Path, finish: str = "") -> Path:
    text = f"""campaign: finish_test
family: {ROOT / "examples" / "fused_add_rmsnorm"}
geometries:
  - {{name: T1_H4096, T: 1, H: 4096, weight: 1}}
  - {{name: T32_H4096, T: 32, H: 4096, weight: 1}}
  - {{name: T128_H7168, T: 128, H: 7168, weight: 1}}
budget: {{attempts: 20}}
gates:
  correctness: {{mode: tolerance, seeds: 3, runs: 2, tolerance_factor: 2.0}}
  perf: {{rounds: 12, aa_rounds: 100, min_gain: 0.01, batch_ms: 10.0, rule: weighted}}
backend: recorded
peer: {{torch_compile: "off"}}
storage: sqlite:///{tmp_path / "c.db"}
{finish}
"""
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


def _campaign(path: Path, genomes, lines: list[str] | None = None, **kw) -> Campaign:
    cfg = load_config(path)
    out = lines.append if lines is not None else (lambda s: None)
    return Campaign(cfg, out=out, command="pytest", proposer=Scripted(cfg.family, genomes), **kw)


def test_a_near_champion_under_the_1pct_step_is_accepted_by_the_finish_logged_and_not_run_again(tmp_path):
    lines: list[str] = []
    cfg = load_config(_config(tmp_path))
    spy = Spy(make_backend(cfg, Builder.for_config(cfg)))
    camp = Campaign(
        cfg, out=lines.append, command="pytest", proposer=Scripted(cfg.family, [CHAMP, NEAR_MISS]), backend=spy
    )
    summary = camp.run()
    # head to head with more rounds: 3 x gates.perf.rounds at each geometry (the sweep holds 10 of them)
    assert [r for parts, r in spy.rounds if parts[0] == "cand"] == [12] * 6 + [36] * 3
    atts = camp.ledger.attempts()
    by_genome = {a.genome_key: a for a in atts if a.finish is None}
    champ, miss = by_genome[camp.family.genome(CHAMP).key], by_genome[camp.family.genome(NEAR_MISS).key]
    # the search turned it down: over the A/A-justified bound, under the 1% step
    assert miss.verdict.code is Code.PERF_NOT_FASTER and "lower bound under 1.0100" in miss.verdict.reason
    assert miss.parent_id == champ.id
    finish = [a for a in atts if a.finish is not None]
    assert len(finish) == 1
    step = finish[0]
    assert step.genome_key == miss.genome_key and step.verdict.status == ACCEPTED
    assert "needs > 1.0054" in step.verdict.reason and step.parent_id == champ.id
    assert step.finish["kind"] == NEAR and step.finish["of"] == [miss.id] and step.finish["trigger"] == END
    assert step.finish["reason"].startswith("search space exhausted")
    assert step.derived_from == [miss.id] and step.origin.startswith("finish (")
    assert summary.champion is not None and summary.champion.id == step.id
    runs = finish_runs(camp.ledger.all_meta())
    assert [(r.champion, r.trigger, r.ended, r.tried, r.accepted) for r in runs] == [
        (champ.id, END, "done", [step.id], [step.id]),
        (step.id, END, "nothing to try", [], []),  # the new champion's finish: the near miss is no candidate again
    ]
    assert round(runs[0].threshold, 4) == 1.0054 and runs[0].rounds == 36
    assert any(s.startswith("finish (search space exhausted") and "1 near-champion(s)" in s for s in lines)
    log = render_log(atts, camp.ledger.all_meta())
    assert "## Finish" in log and "### Finish 1: search space exhausted" in log
    assert f"| #{step.id} | near-champion | vec 2->8 | #{miss.id} |" in log
    assert f"accepted #{step.id}" in log

    # a resume finds both finishes ended: nothing is measured again
    again = _campaign(_config(tmp_path), [CHAMP, NEAR_MISS])
    s2 = again.run()
    assert s2.new_attempts == 0 and len(again.ledger.attempts()) == len(atts)
    assert again.ledger.meta(FINISH_META) == camp.ledger.meta(FINISH_META)


def test_with_the_finish_disabled_the_campaign_ends_as_before(tmp_path):
    camp = _campaign(_config(tmp_path, "search: {finish: {enabled: false}}"), [CHAMP, NEAR_MISS])
    summary = camp.run()
    atts = camp.ledger.attempts()
    assert [a.verdict.code for a in atts] == [Code.BASELINE, Code.PERF_ACCEPTED, Code.PERF_NOT_FASTER]
    assert summary.champion is not None and summary.champion.id == 1 and summary.new_attempts == 2
    assert all(a.finish is None for a in atts) and camp.ledger.meta(FINISH_META) is None
    assert "## Finish" not in render_log(atts, camp.ledger.all_meta())


def test_pairs_of_unmerged_single_knob_gains_are_measured_and_a_stopped_finish_resumes_without_repeats(tmp_path):
    def stop_after_first_finish_attempt(a, c):
        if a.finish is not None:
            raise KeyboardInterrupt

    camp = _campaign(_config(tmp_path), [CHAMP4, GAIN_BLOCK, GAIN_VEC], on_attempt=stop_after_first_finish_attempt)
    assert camp.run().stopped == "interrupted by the user"
    first = [a for a in camp.ledger.attempts() if a.finish is not None]
    assert len(first) == 1 and first[0].finish["kind"] == NEAR  # the best near miss first: vec 8 (1.006x)
    assert first[0].genome_key == camp.family.genome(GAIN_VEC).key and first[0].verdict.code is Code.PERF_NOT_FASTER
    (open_run,) = finish_runs(camp.ledger.all_meta())
    assert open_run.ended is None and [p.kind for p in open_run.planned] == [NEAR, NEAR, PAIR]

    again = _campaign(_config(tmp_path), [CHAMP4, GAIN_BLOCK, GAIN_VEC])
    summary = again.run()
    atts = again.ledger.attempts()
    finish = [a for a in atts if a.finish is not None]
    assert len({a.genome_key for a in finish}) == len(finish) == 3  # continued: nothing measured twice
    pair = finish[-1]
    assert pair.finish["kind"] == PAIR and pair.genome_key == again.family.genome(BOTH).key
    assert pair.verdict.status == ACCEPTED and summary.champion is not None and summary.champion.id == pair.id
    by_id = {a.id: a for a in atts}  # the gains' latest measurements: vec 8's is the finish's own
    assert {by_id[i].genome_key for i in pair.finish["of"]} == {
        again.family.genome(g).key for g in (GAIN_BLOCK, GAIN_VEC)
    }
    runs = finish_runs(again.ledger.all_meta())
    assert runs[0].index == 0 and runs[0].ended == "done" and runs[0].accepted == [pair.id]
    assert len(runs[0].tried) == 3
    assert "| pair | block 1024->512, vec 4->8 |" in render_log(atts, again.ledger.all_meta())


def _fake(attempts: int | None = 100, minutes: float | None = None, stall: int = 1000, meta=None):
    """What due() reads of a campaign: its config's budget and search.finish, and the ledger's meta."""
    led = MemoryLedger()
    if meta:
        led.set_meta(FINISH_META, meta)
    finish = SimpleNamespace(stall=stall, budget_share=0.15, top_k=5, pairs=3)
    cfg = SimpleNamespace(
        search=SimpleNamespace(finish=finish), budget=SimpleNamespace(attempts=attempts, minutes=minutes)
    )
    return SimpleNamespace(cfg=cfg, ledger=led)


def _atts(n: int):
    from evo.core.records import Attempt, Verdict

    return [
        Attempt(id=i, campaign="c", family="f", genome={}, genome_key=str(i), verdict=Verdict.rejected("perf", "x"))
        for i in range(n)
    ]


@pytest.mark.parametrize(
    "kw, n, elapsed, want",
    [
        ({}, 10, 0.0, None),  # nothing holds
        ({"stall": 5}, 10, 0.0, STALL),  # 9 attempts after champion #0
        ({}, 92, 0.0, END),  # 8 left <= max(15% of 100, top_k + pairs)
        ({}, 84, 0.0, None),  # 16 left
        ({"attempts": 20}, 14, 0.0, None),  # 6 left > 15% of 20, and the finish has nothing to measure
        ({"attempts": 20, "plan": 6}, 14, 0.0, END),  # ... or 6 to measure: it starts, to fit in the budget
        ({"attempts": None, "minutes": 10.0}, 10, 520.0, END),  # 1.3 of 10 min left
        ({"attempts": None, "minutes": 10.0}, 10, 500.0, None),
    ],
)
def test_when_the_finish_is_due(kw, n, elapsed, want):
    atts = _atts(n)
    plan = kw.pop("plan", 0)
    got = due(_fake(**kw), atts, atts[0], elapsed, None, lambda: plan)
    assert (got[0] if got else None) == want


def test_a_finish_runs_once_per_trigger_and_champion():
    atts = _atts(95)  # both a stall (30) and the budget's end hold for champion #0
    ended = {"index": 0, "champion": 0, "reason": "r", "started_at": "", "rounds": 36, "floor": 0.0,
             "min_gain": 0.0, "threshold": 1.0, "ended": "done"}  # fmt: skip
    assert due(_fake(stall=30), atts, atts[0], 0.0, None)[0] == END  # the end covers the stall
    assert due(_fake(stall=30, meta=[{**ended, "trigger": STALL}]), atts, atts[0], 0.0, None)[0] == END
    assert due(_fake(stall=30, meta=[{**ended, "trigger": END}]), atts, atts[0], 0.0, None) is None
    assert due(_fake(stall=30, meta=[{**ended, "trigger": END}]), atts, atts[1], 0.0, None)[0] == END  # another
    assert due(_fake(attempts=1000, stall=30, meta=[{**ended, "trigger": STALL}]), atts, atts[0], 0.0, None) is None
    cut = [{**ended, "trigger": STALL, "ended": None}]  # stopped before it ended: continued
    assert due(_fake(stall=30, meta=cut), atts, atts[0], 0.0, None) == (STALL, "r")


def test_finish_options_are_checked(tmp_path):
    with pytest.raises(ConfigError, match=r"search\.finish\.top_k: -1 is out of range"):
        load_config(_config(tmp_path, "search: {finish: {top_k: -1}}"))
    with pytest.raises(ConfigError, match=r"search\.finish\.topk: unknown key"):
        load_config(_config(tmp_path, "search: {finish: {topk: 3}}"))
    cfg = load_config(_config(tmp_path, "search: {finish: {rounds: 48, min_gain: 0.002}}"))
    assert cfg.search.finish.rounds == 48 and cfg.search.finish.min_gain == 0.002 and cfg.search.finish.enabled


@pytest.mark.gpu
def test_on_a_gpu_the_finish_runs_at_a_stall_with_more_rounds(tmp_path):
    """The deployed proposer on the GPU: a stall of 6 attempts starts the finish; whatever it measured in full was
    timed with 3 x 12 rounds (throttled ones dropped), and the log says what it tried."""
    extra = 'search: {finish: {stall: 6, top_k: 3, pairs: 1}}\nsanitizer: {enabled: "off"}'
    text = _config(tmp_path, extra).read_text()
    p = tmp_path / "gpu.yaml"
    p.write_text(text.replace("backend: recorded", "backend: gpu").replace("{attempts: 20}", "{attempts: 24}"))
    camp = Campaign(load_config(p), out=lambda s: None, command="pytest")
    camp.run()
    atts = camp.ledger.attempts()
    runs = finish_runs(camp.ledger.all_meta())
    assert runs and all(r.rounds == 36 for r in runs)
    for a in atts:
        if a.finish is not None and a.verdict.code is not Code.PERF_EARLY_STOP and a.timings:
            assert all(t.samples + t.discarded > 12 for t in a.timings.values())
    assert "## Finish" in render_log(atts, camp.ledger.all_meta())
