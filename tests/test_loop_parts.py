"""The campaign loop's parts in evo/loop, each on its own (no campaign, no build): the loaded-module cache, the
budget, the shared-storage checks and the printed floor lines."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from evo.core.records import Attempt, Verdict
from evo.loop.budget import budget_spent, spent_at_resume
from evo.loop.modules import LoadedModules
from evo.loop.report_lines import floor_lines
from evo.loop.shared import others_hold_the_rest


class CountingBackend:
    """Loads a genome as its key and sizes each graph as the number of times it was asked."""

    name = "fake"

    def __init__(self) -> None:
        self.loads: list[Any] = []
        self.sized = 0

    def load(self, built: Any, genome: Any) -> Any:
        self.loads.append((built, dict(genome)))
        return SimpleNamespace(genome=genome)

    def launches_for(self, loaded: Any, g: Any) -> int:
        self.sized += 1
        return 100 + self.sized


class NoBuilder:
    def build(self, genome: Any) -> Any:
        raise AssertionError("a simulated backend builds nothing")


def test_a_genome_is_loaded_once_and_each_part_sized_once_per_geometry():
    be = CountingBackend()
    mods = LoadedModules(be, NoBuilder(), simulated=True)  # type: ignore[arg-type]
    a = mods.load("built-a", {"block": 128})
    assert mods.load("other", {"block": 128}) is a and mods.load_genome({"block": 128}) is a
    b = mods.load_genome({"block": 256})  # not cached: loaded without a build (simulated)
    assert be.loads == [("built-a", {"block": 128}), (None, {"block": 256})]
    g1, g2 = SimpleNamespace(name="g1"), SimpleNamespace(name="g2")
    first = mods.part_launches([("cand", a), ("champ", b)], ["ka", "kb"], g1)
    assert first == {"cand": 101, "champ": 102}
    assert mods.part_launches([("champ", a)], ["ka"], g1) == {"champ": 101}  # by genome key, not label
    assert mods.part_launches([("cand", a)], ["ka"], g2) == {"cand": 103}
    mods.forget("no-such-key")  # (an unknown key is no error)
    key = next(iter(mods.loaded))
    mods.forget(key)
    assert key not in mods.loaded


def _att(i: int, kind: str = "accepted") -> Attempt:
    a = Attempt(id=i, campaign="c", family="f", genome={}, genome_key=str(i), origin="t")
    a.verdict = Verdict.error("interrupted", "cut") if kind == "interrupted" else Verdict("baseline", None, "base")
    return a


def test_the_budget_counts_all_but_interrupted_attempts():
    atts = [_att(0), _att(1, "interrupted"), _att(2)]
    budget = SimpleNamespace(attempts=3, minutes=None)
    counted, spent = budget_spent(budget, atts, 0.0)
    assert [a.id for a in counted] == [0, 2] and spent is None
    assert budget_spent(SimpleNamespace(attempts=2, minutes=None), atts, 0.0)[1] == "attempt budget reached (2/2)"
    assert budget_spent(SimpleNamespace(attempts=None, minutes=1), atts, 90.0)[1] == "time budget reached (1.5/1 min)"


def test_a_resume_is_spent_only_for_a_lone_campaign_with_its_baseline():
    led = SimpleNamespace(shared=False, meta=lambda k: {"x": 1}, attempts=lambda: [_att(0), _att(1)])
    budget = SimpleNamespace(attempts=2, minutes=None)
    assert spent_at_resume(led, budget, 0.0) == "attempt budget reached (2/2)"
    assert spent_at_resume(SimpleNamespace(**{**vars(led), "shared": True}), budget, 0.0) is None
    assert spent_at_resume(SimpleNamespace(**{**vars(led), "meta": lambda k: None}), budget, 0.0) is None


def test_others_hold_the_rest_only_on_a_shared_storage_with_nothing_pending():
    view = SimpleNamespace(running=[object()])
    budget = SimpleNamespace(attempts=2)
    shared, alone = SimpleNamespace(shared=True), SimpleNamespace(shared=False)
    assert others_hold_the_rest(shared, budget, [_att(0)], view, None)  # type: ignore[arg-type]
    assert not others_hold_the_rest(alone, budget, [_att(0)], view, None)  # type: ignore[arg-type]
    assert not others_hold_the_rest(shared, budget, [_att(0)], view, ("prop", "trial"))  # type: ignore[arg-type]
    assert not others_hold_the_rest(shared, SimpleNamespace(attempts=None), [_att(0)], view, None)  # type: ignore


def test_the_floor_lines_say_what_a_win_needs_and_warn_above_max_floor():
    perf = SimpleNamespace(min_gain=0.0, rule="every", max_floor=0.01)
    lines = floor_lines({"g1": 0.002, "g2": 0.02}, 0.02, perf)
    assert lines[0].startswith("A/A noise floor: g1 0.200%, g2 2.000%; a win needs > ")
    assert lines[0].endswith("on every weighted geometry")
    assert len(lines) == 2 and lines[1].startswith("warning: the noise floor 2.000% is above")
    assert len(floor_lines({"g1": 0.002}, 0.002, perf)) == 1
