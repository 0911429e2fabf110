"""Every reader of a recorded sweep follows ``same_as`` links by one rule (harness.sweepfile.linked_entry, at most
SAME_AS_HOPS links): the search benchmark used to follow 8 where the recorded backend stopped at 4, so a genome
the campaign refuses as not recorded was a scored point of the benchmark's landscape (issue #41)."""

from __future__ import annotations

import copy

import pytest

import harness.recorded as recorded
from evo.config import load_config
from evo.core.genome import Genome
from harness import sweepfile
from harness.recorded import NotRecorded, RecordedBackend
from tools import search_bench as sb

CONFIG = "configs/mhc_pre_big_fuse.yaml"
REAL = "candidates/mhc_pre_big_fuse/recorded/h200-sweep.json.xz"


@pytest.fixture(scope="module")
def chained():
    """The real sweep with a chain of links: genome i of the chain links to genome i-1, the first to a genome with
    data, so the chain's i-th genome is i hops from its data (each link records its launch, as sweeps do now)."""
    d = sweepfile.load(REAL)
    keys = [k for k, e in d["genomes"].items() if k != d["baseline_key"] and "same_as" not in e]
    data, chain = keys[0], keys[1 : 1 + sweepfile.SAME_AS_HOPS + 2]
    prev = data
    for k in chain:
        d["genomes"][k] = {"same_as": prev, "sass": "linked", "launch": "same"}
        prev = k
    return d, chain


def _served(be: RecordedBackend, key: str) -> bool:
    try:
        be.correctness(be.load(None, Genome.from_key(key)))
    except NotRecorded:
        return False
    return True


def test_the_bench_and_the_recorded_backend_follow_links_equally_far(chained, monkeypatch):
    d, chain = chained
    cfg = load_config(CONFIG)
    monkeypatch.setattr(recorded, "load_sweeps", lambda family: [{**copy.deepcopy(d), "_path": REAL}])
    be = RecordedBackend(cfg.family, cfg.geometries)
    hops = range(1, len(chain) + 1)
    backend = [_served(be, k) for k in chain]
    bench = [sb.entry(d["genomes"], k) is not None for k in chain]
    assert backend == [h <= sweepfile.SAME_AS_HOPS for h in hops]
    assert bench == backend  # before: the bench scored the genomes 5 and 6 hops away


def test_a_chain_past_the_limit_is_no_data(chained):
    d, chain = chained
    assert sweepfile.linked_entry(d["genomes"], chain[sweepfile.SAME_AS_HOPS - 1]) is not None
    assert sweepfile.linked_entry(d["genomes"], chain[sweepfile.SAME_AS_HOPS]) is None


def test_each_link_is_shown_to_the_callers_check_before_it_is_followed():
    genomes = {"a": {"same_as": "b"}, "b": {"same_as": "c"}, "c": {"t": {}}}
    seen = []
    assert sweepfile.linked_entry(genomes, "a", lambda key, link: seen.append((key, link["same_as"]))) == {"t": {}}
    assert seen == [("a", "b"), ("a", "c")]
    assert sweepfile.linked_entry(genomes, "missing") is None
    assert sweepfile.linked_entry({"a": {"same_as": "gone"}}, "a") is None


def test_a_synthetic_landscape_takes_its_baseline_by_the_same_rule():
    """tools/synth_landscape.py followed the template baseline's links without a limit (a cycle never ended)."""
    from tools import synth_landscape as sl

    d = sweepfile.load(REAL)
    base = d["baseline_key"]
    others = [k for k, e in d["genomes"].items() if k != base and "same_as" not in e]
    d["genomes"][others[0]] = copy.deepcopy(d["genomes"][base])
    prev = others[0]
    for k in [*others[1 : sweepfile.SAME_AS_HOPS + 1], base]:  # the baseline SAME_AS_HOPS + 1 links from data
        d["genomes"][k] = {"same_as": prev, "sass": "linked", "launch": "same"}
        prev = k
    with pytest.raises(ValueError, match="has no data within 4 same_as links"):
        sl.landscape("mhc_pre_big_fuse", sl.KINDS[0], 1, template=d)
