"""The Optuna proposers' indexed study (evo/search/optuna_samplers.py) changes speed, not behaviour.

The proposers tell every ask that family.check rules out as FAIL, so their studies fill with FAIL trials; the
indexed storage serves state-filtered reads without scanning them. These tests check that the samplers propose
exactly what they propose on a plain ``optuna.create_study``, that the storage answers every read as Optuna's
does, and search_bench's ``--retries`` (the explicit, non-default way to cap the asks).
"""

from __future__ import annotations

import itertools

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState

import evo.search.optuna_samplers as osamp
from evo.ledger import optuna_private
from tools import search_bench as sb


@pytest.fixture(scope="module")
def prenorm() -> sb.Space:
    return sb.load_space("mhc_prenorm_gemm")  # 3100 valid genomes of a 7056-genome product


def _vanilla(sampler):
    return optuna.create_study(direction="maximize", sampler=sampler)


@pytest.mark.parametrize("name,seed", [("tpe", 0), ("tpe", 3), ("nsga2", 0)])
def test_same_proposals_as_a_plain_study(prenorm, monkeypatch, name, seed):
    opts = {"retries": 20}  # small, so that the plain study (which slows down with its FAIL trials) stays quick
    studies, memo = [], osamp._MemoTPESampler
    for make, tpe in ((osamp._create_study, memo), (_vanilla, optuna.samplers.TPESampler)):
        monkeypatch.setattr(
            osamp, "_create_study", lambda sampler, make=make: studies.append(make(sampler)) or studies[-1]
        )
        monkeypatch.setattr(osamp, "_MemoTPESampler", tpe)
        studies.append(sb.run_proposer(prenorm, name, seed, opts, cap=150, until_target=False))
    (fast_study, fast, plain_study, plain) = studies
    assert isinstance(fast_study, optuna_private.IndexedStudy) and not isinstance(
        plain_study, optuna_private.IndexedStudy
    )
    assert type(plain_study.sampler) in (optuna.samplers.TPESampler, optuna.samplers.NSGAIISampler)
    assert (type(fast_study.sampler) is memo) == (name == "tpe")
    if name == "tpe":
        assert fast_study.sampler.memo_hits > len(fast_study.trials) // 2  # most asks reused the estimators
    assert fast.keys == plain.keys and len(fast.keys) == 150 and fast.notes == plain.notes
    states = [t.state for t in fast_study.trials]
    assert states == [t.state for t in plain_study.trials]
    if name == "tpe":  # TPE on this space is in the FAIL-heavy regime the index is for (NSGA-II much less so)
        assert states.count(TrialState.FAIL) > 3 * states.count(TrialState.COMPLETE)


def test_the_indexed_storage_answers_like_optuna():
    dists = {"a": CategoricalDistribution([1, 2, 3]), "b": CategoricalDistribution(["x", "y"])}
    studies = [
        osamp._create_study(optuna.samplers.RandomSampler(seed=1)),
        _vanilla(optuna.samplers.RandomSampler(seed=1)),
    ]
    assert isinstance(studies[0], optuna_private.IndexedStudy)
    for st in studies:
        held = [st.ask(dists) for _ in range(4)]  # RUNNING, told later and out of order
        for i in range(30):
            t = st.ask(dists)
            if i % 3:
                st.tell(t, state=TrialState.FAIL)
            elif i % 5:
                st.tell(t, float(i))
            else:
                st.tell(t, state=TrialState.PRUNED)
        st.add_trial(optuna.trial.create_trial(state=TrialState.FAIL, params={"a": 1, "b": "x"}, distributions=dists))
        st.add_trial(optuna.trial.create_trial(value=0.5, params={"a": 2, "b": "y"}, distributions=dists))
        st.enqueue_trial({"a": 3, "b": "x"})
        st.tell(held[1], state=TrialState.FAIL)  # a trial in the middle fails
        st.tell(held[2], 7.0)
    every = [TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.FAIL, TrialState.WAITING]
    combos = [None] + [tuple(c) for r in (1, 2, 3) for c in itertools.combinations(every, r)]

    def view(st, **kw):
        return [(t.number, t.state, t.values, t.params) for t in st._get_trials(**kw)]

    for states in combos:
        for deepcopy in (True, False):
            a, b = (view(st, deepcopy=deepcopy, states=states, use_cache=True) for st in studies)
            assert a == b, states
            assert a == [x for x in view(studies[1], deepcopy=False) if states is None or x[1] in states]
    assert [t.state for t in studies[0].trials] == [t.state for t in studies[1].trials]
    assert studies[0]._storage._unfailed[0] == [t.number for t in studies[0].trials if t.state != TrialState.FAIL]


def test_retries_option_reaches_only_the_optuna_proposers(prenorm, monkeypatch):
    seen: dict[str, dict] = {}
    real = sb.run_proposer

    def spy(space, name, seed, options=None, **kw):
        seen[name] = dict(options or {})
        return real(space, name, seed, options, cap=5, until_target=False)

    monkeypatch.setattr(sb, "run_proposer", spy)
    chosen = [s for s in sb.STRATEGIES if s.name in ("config", "random", "tpe", "nsga2") and s.kind == "evo"]
    sb.bench(prenorm, 1, chosen, out=lambda _: None, retries=7)
    assert seen == {"config": {}, "random": {}, "tpe": {"retries": 7}, "nsga2": {"retries": 7}}
    sb.bench(prenorm, 1, chosen, out=lambda _: None)
    assert seen["tpe"] == {} and seen["nsga2"] == {}  # the default: the proposers' own (100)
    assert sb.doc_tag("f", retries=7) == "search-bench-f-retries-7" and sb.doc_tag("f") == "search-bench-f"
    with pytest.raises(SystemExit):
        sb.main(["--family", "mhc_prenorm_gemm", "--retries", "0"])
