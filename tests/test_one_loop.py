"""One campaign loop behind `evo run` and `evo worker`, and its seams: the gate list, the harness's one error base,
the backend registry and the protocols (evo/core/protocols.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evo.backends import BACKENDS, REGISTRY, BackendEntry, PluginError, register
from evo.config import load_config
from evo.core.protocols import Backend, Gate, Storage
from evo.core.records import ERROR, REJECTED, Code, Verdict
from evo.ledger.ledger import Ledger
from evo.ledger.memory_ledger import MemoryLedger
from evo.loop.campaign import Campaign, CampaignError
from evo.loop.seams import make_backend
from evo.loop.workers import WorkerCampaign
from gates.registry import RegisteredGate, builtin_gates, gate_order
from harness import HarnessError
from harness.recorded import RecordedBackend
from tests.test_campaign import write_config

ROOT = Path(__file__).resolve().parent.parent


def _trace(camp: Campaign) -> list[tuple[str, str, float | None]]:
    return [(a.genome_key, a.verdict.code.value, a.score) for a in camp.ledger.attempts()]


def test_evo_run_and_one_worker_make_the_same_attempts(tmp_path):
    """The same config, seed and recorded sweep through `evo run`'s loop and through one worker's: the same attempts,
    verdicts and scores (a worker's proposer seed differs only so that several workers propose apart)."""
    run = Campaign(load_config(write_config(tmp_path, 18, name="run")), out=lambda s: None, command="pytest")
    run.run()
    worker = WorkerCampaign(load_config(write_config(tmp_path, 18, name="worker")), out=lambda s: None)
    assert worker.proposer_seed(1) != run.proposer_seed(1)
    worker.proposer_seed = run.proposer_seed  # type: ignore[method-assign]
    worker.run()
    assert len(_trace(run)) == 18 and _trace(run) == _trace(worker)
    assert all(a.device.get("worker") == worker.name for a in worker.ledger.attempts()[1:])  # (shared: named)


class Policy:
    """A gate of a policy the shipped ones do not have: no block of 512 threads; it sees the build's report."""

    name = "policy"

    def __init__(self) -> None:
        self.seen: list[int] = []

    def __call__(self, step) -> Verdict | None:
        assert step.built is not None and step.loaded is None  # after the build, before any measurement
        self.seen.append(step.attempt.id)
        if step.proposal.genome["block"] == 512:
            return Verdict.rejected("static", "block 512 is against this campaign's policy")
        return None


@pytest.mark.parametrize("cls", [Campaign, WorkerCampaign])
def test_a_gate_added_to_the_list_judges_every_attempt(tmp_path, cls):
    policy = Policy()
    gates: list = builtin_gates()
    gates.insert([g.name for g in gates].index("static") + 1, policy)
    camp = cls(load_config(write_config(tmp_path, 20)), out=lambda s: None, gates=gates)
    camp.run()
    atts = camp.ledger.attempts()
    before = {Code.ERROR_COMPILE, Code.STATIC_REGISTERS, Code.STATIC_SPILLS, Code.STATIC_STACK}  # (gates before it)
    judged = [a for a in atts[1:] if a.verdict.code not in before]
    assert policy.seen == [a.id for a in judged]  # every attempt past the build, once, in order
    blocked = [a for a in atts if a.genome["block"] == 512 and a.id]
    assert blocked, "the seeded run proposes block 512 (else this test checks nothing)"
    assert all(a.verdict.reason == "block 512 is against this campaign's policy" and not a.timings for a in blocked)


class Faulty:
    """The recorded backend, with correctness raising a harness error for chosen genomes."""

    def __init__(self, inner: RecordedBackend, faults: dict[int, HarnessError]):
        self.inner, self.faults = inner, faults

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def correctness(self, loaded, *, freeze: bool = False):
        e = self.faults.get(loaded.genome.get("unroll"))
        if e is not None and not freeze:
            raise e
        return self.inner.correctness(loaded, freeze=freeze)


class Hang(HarnessError):
    kind = "timeout"


class DeviceLost(HarnessError):
    kind, fatal = "crash", True


def test_harness_errors_are_recorded_by_kind_and_only_a_fatal_one_ends_the_run(tmp_path):
    cfg = load_config(write_config(tmp_path, 30))
    inner = RecordedBackend(cfg.family, cfg.geometries)
    camp = Campaign(cfg, out=lambda s: None, backend=Faulty(inner, {4: Hang("no answer in 3 s")}))
    summary = camp.run()
    atts = camp.ledger.attempts()
    hung = [a for a in atts if a.verdict.status == ERROR]
    assert hung and all(a.verdict.code is Code.ERROR_TIMEOUT and a.genome["unroll"] == 4 for a in hung)
    assert all(a.verdict.reason == "no answer in 3 s" for a in hung)
    assert summary.stopped.startswith("attempt budget reached")  # the run went on

    cfg = load_config(write_config(tmp_path, 30, name="fatal"))
    camp = Campaign(cfg, out=lambda s: None, backend=Faulty(inner, {4: DeviceLost("illegal address\nmore")}))
    with pytest.raises(DeviceLost):
        camp.run()
    last = camp.ledger.attempts()[-1]  # recorded before it passed on
    assert last.verdict.code is Code.ERROR_CRASH and last.verdict.reason == "DeviceLost: illegal address"
    assert camp.ledger.running() == []


def test_backends_register_by_name_and_the_cli_offers_them(tmp_path):
    assert tuple(BACKENDS) == ("auto", *REGISTRY) and {"gpu", "recorded"} <= set(REGISTRY)
    with pytest.raises(PluginError, match="registered already"):
        register(BackendEntry("recorded", "x:y", "x:y"))
    cfg = load_config(write_config(tmp_path, 3))
    made: list[str] = []

    def mine(cfg, builder):
        made.append(cfg.campaign)
        return RecordedBackend(cfg.family, cfg.geometries)

    register(BackendEntry("mine", f"{__name__}:_mine", f"{__name__}:_mine", unavailable="mine: "))
    try:
        globals()["_mine"] = mine
        cfg.backend = "mine"  # (worker.isolation: auto isolates only the entries that ask for it)
        assert make_backend(cfg, None).name == "recorded" and made == [cfg.campaign]
        globals()["_mine"] = lambda cfg, builder: RecordedBackend(cfg.family, [_nowhere(cfg)])
        with pytest.raises(CampaignError, match="^mine: no recorded H200 sweep covers"):
            make_backend(cfg, None)
    finally:
        REGISTRY.unregister("mine")
    cfg.backend = "nope"
    with pytest.raises(CampaignError, match="backend: nope is not registered"):
        make_backend(cfg, None)
    r = subprocess.run(
        [sys.executable, "-m", "evo", "run", "x.yaml", "--backend", "nope"], capture_output=True, text=True, cwd=ROOT
    )
    assert r.returncode == 2 and "'auto', 'gpu', 'recorded'" in r.stderr


def _nowhere(cfg):
    import dataclasses

    g = cfg.geometries[0]
    return dataclasses.replace(g, params={**g.params, "T": 12345})


def test_the_seams_are_the_protocols(tmp_path):
    cfg = load_config(write_config(tmp_path, 3))
    assert isinstance(RecordedBackend(cfg.family, cfg.geometries), Backend)
    assert isinstance(Ledger(cfg.storage, cfg.campaign, cfg.family.knobs), Storage)
    assert isinstance(MemoryLedger(), Storage)
    assert all(isinstance(g, Gate) and isinstance(g, RegisteredGate) for g in gate_order())
    names = [g.name for g in gate_order()]
    assert names.index("build") < names.index("static") < names.index("correctness") < names.index("perf")
    assert len(set(names)) == len(names)


def test_a_campaign_on_a_memory_ledger_is_a_whole_campaign(tmp_path):
    """The storage seam: the loop on MemoryLedger (the search benchmark's) records what it records on SQLite."""
    on_disk = Campaign(load_config(write_config(tmp_path, 12)), out=lambda s: None)
    on_disk.run()
    mem = MemoryLedger()
    in_memory = Campaign(load_config(write_config(tmp_path, 12, name="m")), out=lambda s: None, storage=mem)
    summary = in_memory.run()
    assert _trace(on_disk) == _trace(in_memory) and summary.attempts == 12
    assert mem.meta("baseline_id") == 0 and mem.meta("elapsed_s") > 0 and mem.running() == []
    assert [a.verdict.status for a in mem.attempts()].count(REJECTED) > 0


def test_a_worker_measures_against_a_champion_another_worker_accepted_meanwhile(tmp_path):
    import dataclasses
    import itertools

    from evo.core.genome import Genome

    camp = WorkerCampaign(load_config(write_config(tmp_path, 8)), out=lambda s: None)
    other = Ledger(camp.cfg.storage, camp.cfg.campaign, camp.family.knobs, shared=True)
    theirs: list[int] = []

    def on_attempt(a, c) -> None:
        if a.id == 2 and not theirs:  # another worker records a win while this one runs
            seen = c.ledger.seen_keys()
            names = [k.name for k in c.family.knobs]
            g = next(
                Genome(dict(zip(names, v)))
                for v in itertools.product(*(k.values for k in c.family.knobs))
                if Genome(dict(zip(names, v))).key not in seen
            )
            trial = other.ask(g)
            won = Verdict.accepted("another worker's win")
            other.record(trial, dataclasses.replace(a, genome=dict(g), genome_key=g.key, verdict=won, score=9.0))
            theirs.append(trial.number)

    camp.on_attempt = on_attempt
    camp.run()
    later = [a for a in camp.ledger.attempts() if theirs and a.id > theirs[0]]
    assert theirs and later and later[0].parent_id == theirs[0]
