"""Genomes and the proposers: canonical keys, no repeats, only valid genomes, honest origins, exhaustion."""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from evo.core.family import Family, Geometry, Knob, Launch, OutputSpec, load_family
from evo.core.genome import Genome
from evo.core.records import ACCEPTED, BASELINE, Attempt, Verdict
from evo.search import PROPOSERS, Evolutionary, RandomSearch

FAM = load_family("mhc_pre_big_fuse")
GEOS = [
    Geometry("T4096_H4096", {"T": 4096, "H": 4096, "S": 1, "prenorm": False}, 1.0),
    Geometry("T1_H4096_S32", {"T": 1, "H": 4096, "S": 32, "prenorm": False}, 0.0),
]
FORBIDDEN = ({"block": 512, "unroll": 4}, {"h_split": 8, "vec": 8})


class _Picky(type(FAM)):  # type: ignore[misc]
    """The real family plus two made-up constraints, so that family.check rules genomes out.

    (mhc_pre_big_fuse's own check cannot fail for a geometry that passes check_geometry: H % 64 == 0
    makes H / h_split a multiple of 8 elements for every h_split <= 8.)
    """

    def check(self, genome, geometries):
        for rule in FORBIDDEN:
            if all(genome[k] == v for k, v in rule.items()):
                return f"made-up rule {rule}"
        return super().check(genome, geometries)


PICKY = _Picky(**{f.name: getattr(FAM, f.name) for f in dataclasses.fields(FAM)})


# ---------------------------------------------------------------------------
# Genome


def test_genome_key_is_canonical():
    a = Genome({"b": 2, "a": "x", "c": True})
    b = Genome({"c": True, "a": "x", "b": 2})
    assert a.key == b.key == '{"a":"x","b":2,"c":true}'
    assert a == b and hash(a) == hash(b)
    assert len({a, b}) == 1
    assert {a: 1}[b] == 1
    assert a == {"a": "x", "b": 2, "c": True}
    assert a != Genome({"a": "x", "b": 3, "c": True})
    assert list(a) == ["a", "b", "c"] and len(a) == 3


def test_genome_replace_is_a_new_genome():
    a = Genome({"block": 256, "meta": "array"})
    b = a.replace(block=512)
    assert a["block"] == 256 and b["block"] == 512
    assert b.key != a.key
    assert a.replace(block=256) == a
    with pytest.raises(TypeError):
        a["block"] = 1  # type: ignore[index]


def test_genome_diff_and_describe_change():
    a = Genome({"block": 256, "meta": "array", "vec": 16})
    b = a.replace(block=512, vec=8)
    assert b.diff(a) == {"block": (256, 512), "vec": (16, 8)}
    assert b.describe_change(a) == "block 256->512, vec 16->8"
    assert a.describe_change(a) == "no change"


def test_genome_from_key_round_trip():
    g = FAM.baseline().replace(meta="slice", warp0_stream=True, h_split=4)
    back = Genome.from_key(g.key)
    assert back == g and back.key == g.key
    assert back["warp0_stream"] is True and back["h_split"] == 4


# ---------------------------------------------------------------------------
# A tiny family: 2 knobs x 2 values


@dataclass
class Tiny(Family):
    forbid: tuple | None = None  # (a, b) ruled out by check()

    def check(self, genome: Mapping[str, Any], geometries) -> str | None:
        if self.forbid is not None and (genome["a"], genome["b"]) == self.forbid:
            return f"a={genome['a']} with b={genome['b']} is not allowed"
        return None

    def outputs(self, geometry: Geometry) -> list[OutputSpec]:
        return []

    def make_inputs(self, geometry: Geometry, seed: int, device: Any) -> dict[str, Any]:
        return {}

    def reference(self, inputs, geometry, dtype=None) -> dict[str, Any]:
        return {}

    def launch(self, genome, geometry) -> Launch:
        return Launch((1, 1, 1), (32, 1, 1))

    def kernel_args(self, inputs, outputs, geometry) -> list[Any]:
        return []


def _tiny(forbid=None) -> Tiny:
    return Tiny(name="tiny", knobs=(Knob("a", (1, 2), 1), Knob("b", ("x", "y"), "x")), forbid=forbid)


TINY_GEO = [Geometry("g", {"T": 1}, 1.0)]


# ---------------------------------------------------------------------------
# Driving a proposer the way the campaign does


def _baseline_attempt(fam: Family) -> Attempt:
    g = fam.baseline()
    return Attempt(0, "t", fam.name, dict(g), g.key, "baseline", verdict=Verdict(BASELINE, None, "base"), score=1.0)


def drive(proposer, fam: Family, n: int, seed: int = 0, judge=None):
    """Propose up to n genomes; score each at random (the champion moves on improvements).

    Returns (attempts, proposals, stopped_early).
    """
    rng = random.Random(seed)
    attempts = [_baseline_attempt(fam)]
    seen = {attempts[0].genome_key}
    proposals = []
    best = 1.0
    for _ in range(n):
        prop = proposer.propose(attempts, set(seen))
        if prop is None:
            return attempts, proposals, True
        proposals.append(prop)
        a = Attempt(
            len(attempts), "t", fam.name, dict(prop.genome), prop.genome.key, prop.origin, list(prop.derived_from)
        )
        verdict, score = judge(prop.genome, rng) if judge else (None, rng.uniform(0.6, 1.4))
        a.score = score
        if verdict is not None:
            a.verdict = verdict
        elif score is not None and score > best * 1.05:
            a.verdict, best = Verdict.accepted("faster"), score
        else:
            a.verdict = Verdict.rejected("perf", "not faster")
        attempts.append(a)
        seen.add(a.genome_key)
    return attempts, proposals, False


def _by_id(attempts):
    return {a.id: a for a in attempts}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_evolutionary_never_repeats_never_invalid(seed):
    prop = Evolutionary(PICKY, GEOS, {"elite": 4, "crossover": 0.3}, seed)
    attempts, proposals, stopped = drive(prop, PICKY, 150, seed)
    assert not stopped and len(proposals) == 150
    keys = [a.genome_key for a in attempts]
    assert len(keys) == len(set(keys)), "a genome was proposed twice"
    for p in proposals:
        assert PICKY.check(p.genome, GEOS) is None, (p.genome, PICKY.check(p.genome, GEOS))
        assert set(p.genome) == {k.name for k in FAM.knobs}
        for k in FAM.knobs:
            assert p.genome[k.name] in k.values
        assert p.origin


def test_the_check_really_rules_genomes_out():
    # Guard for the test above: the check is not vacuous, and the unconstrained run does hit those genomes.
    assert PICKY.check(FAM.baseline().replace(block=512, unroll=4), GEOS) is not None
    assert PICKY.check(FAM.baseline().replace(block=512, unroll=2), GEOS) is None
    _, proposals, _ = drive(Evolutionary(FAM, GEOS, {"elite": 4, "crossover": 0.3}, 0), FAM, 150, 0)
    assert any(PICKY.check(p.genome, GEOS) for p in proposals)


def test_evolutionary_respects_tabu():
    prop = Evolutionary(FAM, GEOS, {}, 3, tabu={"split_reduce": ["warp"], "block": [512]})
    _, proposals, _ = drive(prop, FAM, 120, 3)
    assert proposals
    assert all(p.genome["split_reduce"] != "warp" for p in proposals)
    assert all(p.genome["block"] != 512 for p in proposals)
    # Without the tabu the same run does propose them (so the check above is not vacuous).
    prop = Evolutionary(FAM, GEOS, {}, 3)
    _, proposals, _ = drive(prop, FAM, 120, 3)
    assert any(p.genome["split_reduce"] == "warp" for p in proposals)
    assert any(p.genome["block"] == 512 for p in proposals)


@pytest.mark.parametrize("seed", [0, 5])
def test_evolutionary_origins_are_honest(seed):
    prop = Evolutionary(FAM, GEOS, {"crossover": 0.4, "two_knob": 0.4}, seed)
    attempts, proposals, _ = drive(prop, FAM, 150, seed)
    by_id = _by_id(attempts)
    kinds = {"mutation": 0, "crossover": 0, "crossover+mutation": 0}
    for p in proposals:
        ids = [int(x) for x in re.findall(r"#(\d+)", p.origin)]
        assert ids == p.derived_from, p.origin
        for i in ids:
            assert i in by_id
        if p.origin.startswith("mutation of"):
            assert len(ids) == 1
            parent = Genome(by_id[ids[0]].genome)
            n = len(p.genome.diff(parent))
            assert n in (1, 2), (p.origin, n)
            # the origin names exactly the changed knobs
            assert p.genome.describe_change(parent) in p.origin
            kinds["mutation"] += 1
        elif p.origin.startswith("crossover of"):
            assert len(ids) == 2
            pa, pb = (Genome(by_id[i].genome) for i in ids)
            foreign = [k for k in p.genome if p.genome[k] not in (pa[k], pb[k])]
            if ", then " in p.origin:
                assert len(foreign) <= 1, (p.origin, foreign)
                kinds["crossover+mutation"] += 1
            else:
                assert foreign == [], (p.origin, foreign)
                kinds["crossover"] += 1
        else:
            assert p.origin.startswith("random"), p.origin
    assert kinds["mutation"] > 20 and kinds["crossover"] + kinds["crossover+mutation"] > 10, kinds


def test_evolutionary_two_knob_mutations_happen():
    prop = Evolutionary(FAM, GEOS, {"two_knob": 1.0, "crossover": 0.0}, 11)
    attempts, proposals, _ = drive(prop, FAM, 40, 11)
    by_id = _by_id(attempts)
    sizes = [
        len(p.genome.diff(Genome(by_id[p.derived_from[0]].genome)))
        for p in proposals
        if p.origin.startswith("mutation of") and "exhaustive" not in p.origin
    ]
    assert sizes and all(s == 2 for s in sizes)


def test_evolutionary_first_proposal_without_scores_is_random():
    prop = Evolutionary(FAM, GEOS, {}, 0)
    base = _baseline_attempt(FAM)
    base.score = None
    p = prop.propose([base], {base.genome_key})
    assert p is not None and p.origin.startswith("random") and p.genome.key != base.genome_key


@pytest.mark.parametrize("name", ["evolutionary", "random"])
@pytest.mark.parametrize("forbid", [None, (2, "y")])
def test_tiny_space_is_enumerated_then_exhausted(name, forbid):
    fam = _tiny(forbid)
    prop = PROPOSERS[name](fam, TINY_GEO, {}, 0)
    attempts, proposals, stopped = drive(prop, fam, 10, 0)
    assert stopped, "the proposer kept going in an exhausted space"
    got = {a.genome_key for a in attempts}
    space = {Genome({"a": a, "b": b}).key for a in (1, 2) for b in ("x", "y") if (a, b) != forbid}
    assert got == space
    assert len(attempts) == len(space)  # each once
    assert prop.propose(attempts, got) is None


def test_tiny_space_with_tabu_exhausts_early():
    fam = _tiny()
    prop = Evolutionary(fam, TINY_GEO, {}, 0, tabu={"b": ["y"]})
    attempts, _, stopped = drive(prop, fam, 10, 0)
    assert stopped
    assert {a.genome_key for a in attempts} == {Genome({"a": a, "b": "x"}).key for a in (1, 2)}


@pytest.mark.parametrize(
    "options, bad",
    [
        ({"elite": 0}, "elite"),
        ({"elite": 65}, "elite"),
        ({"elite": 2.5}, "elite"),
        ({"elite": True}, "elite"),
        ({"crossover": 1.5}, "crossover"),
        ({"crossover": -0.1}, "crossover"),
        ({"champion_bias": "x"}, "champion_bias"),
        ({"two_knob": 2}, "two_knob"),
        ({"neighbor": -1}, "neighbor"),
    ],
)
def test_validate_options_rejects_out_of_range(options, bad):
    with pytest.raises(ValueError, match=rf"^{bad}: "):
        Evolutionary.validate_options(options)


def test_validate_options_accepts_in_range():
    Evolutionary.validate_options({"elite": 1, "champion_bias": 0.0, "two_knob": 1, "crossover": 0.25, "neighbor": 1.0})
    Evolutionary.validate_options({"elite": 64})
    Evolutionary.validate_options({})


@pytest.mark.parametrize("seed", [0, 1])
def test_random_search_no_repeats_valid_and_tabu(seed):
    prop = RandomSearch(PICKY, GEOS, {}, seed, tabu={"meta": ["slice"]})
    attempts, proposals, stopped = drive(prop, PICKY, 200, seed)
    assert not stopped
    keys = [a.genome_key for a in attempts]
    assert len(keys) == len(set(keys))
    for p in proposals:
        assert PICKY.check(p.genome, GEOS) is None
        assert p.genome["meta"] != "slice"
        assert p.origin == "random"


def test_seeded_runs_are_reproducible():
    a = [p.genome.key for p in drive(Evolutionary(FAM, GEOS, {}, 42), FAM, 30, 1)[1]]
    b = [p.genome.key for p in drive(Evolutionary(FAM, GEOS, {}, 42), FAM, 30, 1)[1]]
    c = [p.genome.key for p in drive(Evolutionary(FAM, GEOS, {}, 43), FAM, 30, 1)[1]]
    assert a == b
    assert a != c


def test_champion_is_the_newest_accepted():
    # The mutation parent, when it is the champion, is the newest accepted attempt (not merely the best score).
    prop = Evolutionary(FAM, GEOS, {"champion_bias": 1.0, "crossover": 0.0, "elite": 1}, 0)
    base = _baseline_attempt(FAM)
    g1 = FAM.baseline().replace(block=512)
    g2 = FAM.baseline().replace(meta="slice")
    a1 = Attempt(1, "t", FAM.name, dict(g1), g1.key, "m", verdict=Verdict.accepted("x"), score=1.5)
    a2 = Attempt(2, "t", FAM.name, dict(g2), g2.key, "m", verdict=Verdict.accepted("x"), score=1.2)
    seen = {base.genome_key, g1.key, g2.key}
    for _ in range(10):
        p = prop.propose([base, a1, a2], seen)
        assert p.derived_from == [2], p.origin
        assert a2.verdict.status == ACCEPTED
