"""The commands that drive the campaign loop: run (and clocks: lock), worker, replay, sanitize, ablate, selfcheck."""

from __future__ import annotations

import sys

from evo.backends import BACKENDS
from evo.cli.common import (
    BACKEND_HELP,
    EXIT_PROBLEMS,
    EXIT_UNCHECKED,
    EXIT_USAGE,
    Command,
    _damaged,
    _existing,
    _fail,
    _open_ledger,
    campaign_args,
    json_arg,
    result,
)


def _run_parser(sub) -> None:
    r = sub.add_parser(
        "run", help="start or resume a campaign", epilog="every key of the config, with its default: evo config"
    )
    r.add_argument("config", help="campaign YAML, e.g. configs/mhc_pre_big_fuse.yaml")
    r.add_argument("--backend", choices=BACKENDS, metavar="NAME", help=BACKEND_HELP)
    r.add_argument("--storage", help="override the config's storage URL")
    r.add_argument("--attempts", type=int, help="override budget.attempts")
    r.add_argument("--minutes", type=float, help="override budget.minutes")
    r.add_argument("--plain", action="store_true", help="one line per attempt instead of the live view")
    json_arg(r)  # the run's summary; the attempts' lines go to stderr (plain, as with --plain)


def _worker_parser(sub) -> None:
    # workers (evo/loop/workers.py): several processes or hosts share one campaign through its storage
    w = sub.add_parser("worker", help="join a campaign as one of several workers sharing its storage (e.g. PostgreSQL)")
    w.add_argument("config", help="campaign YAML")
    w.add_argument("--storage", help="the shared storage URL, e.g. postgresql+psycopg2://user:pw@host/db")
    w.add_argument("--backend", choices=BACKENDS, metavar="NAME", help=BACKEND_HELP)
    w.add_argument("--attempts", type=int, help="override budget.attempts (the campaign's total, all workers)")
    w.add_argument("--minutes", type=float, help="override budget.minutes")


def _replay_parser(sub) -> None:
    rp = sub.add_parser("replay", help="re-judge rejected attempts on this machine with today's gates")
    campaign_args(rp, backend=True)
    rp.add_argument("--gate", help="only attempts rejected by this gate (static, correctness, perf) or error kind")
    rp.add_argument("--id", type=int, action="append", dest="ids", help="only this attempt (repeatable)")
    json_arg(rp)


def _sanitize_parser(sub) -> None:
    sz = sub.add_parser("sanitize", help="compute-sanitizer (memcheck, racecheck) on the champion or one attempt")
    campaign_args(sz, backend=True)
    sz.add_argument("--id", type=int, help="this attempt instead of the champion")
    json_arg(sz)


def _ablate_parser(sub) -> None:
    ab = sub.add_parser(
        "ablate",
        help="which of the champion's changes carry its gain: each set back alone, measured side by side",
    )
    campaign_args(ab, backend=True)
    ab.add_argument("--rounds", type=int, help="interleaved rounds a geometry (default gates.perf.rounds)")


def _selfcheck_parser(sub) -> None:
    c = sub.add_parser("selfcheck", help="A/A acceptance check and the family's deliberate faults")
    campaign_args(c, backend=True)
    c.add_argument("--aa", type=int, default=50, help="A/A perf-gate evaluations (default 50)")
    json_arg(c)


def _run(cfg, args) -> int:
    from evo.config import apply_budget_overrides
    from evo.loop.campaign import Campaign, CampaignError
    from evo.report.logmd import write_log
    from evo.report.progress import print_champion, run_with_progress

    apply_budget_overrides(cfg, args.attempts, args.minutes)
    if cfg.clocks == "lock":
        return _run_locked(cfg, args)
    try:
        camp = Campaign(cfg, command="evo " + " ".join(sys.argv[1:]))
        camp.claim()  # before anything is printed: a second evo run of this campaign says one line
    except CampaignError as e:
        return _fail(str(e))
    _damaged(camp.ledger)
    sim = f" — {camp.label}" if camp.simulated else ""
    print(f"evo: campaign {cfg.campaign} ({cfg.family.name}) on the {camp.backend.name} backend{sim}")
    try:
        summary = run_with_progress(camp, live=not (args.plain or getattr(args, "json", False)))
    except CampaignError as e:
        return _fail(str(e))
    finally:
        camp.ledger.release()
    print(f"evo: stopped: {summary.stopped}; {summary.new_attempts} new attempt(s), {summary.attempts} recorded{sim}")
    print_champion(summary, sim)
    _sanitize_after_run(camp, summary)
    log = cfg.log_dir / "attempts.md"
    write_log(camp.ledger.attempts(), camp.ledger.all_meta(), log)
    print(f"evo: attempt log: {log}{sim}")
    from evo.report.documents import attempt_brief

    result(
        campaign=cfg.campaign,
        family=cfg.family.name,
        backend=camp.backend.name,
        simulated=bool(camp.simulated),
        stopped=summary.stopped,
        new_attempts=summary.new_attempts,
        attempts=summary.attempts,
        champion=attempt_brief(summary.champion) if summary.champion is not None else None,
        log=str(log),
    )
    return 0


def _sanitize_after_run(camp, summary) -> None:
    """compute-sanitizer on a finished GPU campaign's champion (evo/measure/sanitize.py); its trouble never fails the
    run."""
    from evo.measure.sanitize import after_run

    close = getattr(camp.backend, "close", None)
    if callable(close):  # the worker's GPU memory and context are no longer needed
        close()
    try:
        after_run(camp.cfg, camp.ledger, camp.backend.name, camp.simulated, summary.stopped)
    except Exception as e:
        print(f"evo: sanitizer pass failed: {type(e).__name__}: {' '.join(str(e).split())[:300]}")


def _sanitize(cfg, attempt_id: int | None) -> int:
    """`evo sanitize`: the pass on demand; exit 1 when a tool reports errors, times out or fails, 3 when it could not
    run here (a backend that runs no kernel, compute-sanitizer not installed): never "clean" unchecked."""
    from evo.backends import resolve
    from evo.measure.sanitize import UNAVAILABLE, failed_tools, sanitize_attempt, skip_reason
    from evo.report.logmd import write_log

    if not _existing(cfg):
        return _fail(f"campaign {cfg.campaign} has no ledger yet at {cfg.storage} (start it with evo run)")
    led = _open_ledger(cfg)
    champ = led.champion()
    if attempt_id is None:
        target = champ
        if target is None:
            return _fail(f"campaign {cfg.campaign} has no champion yet (no baseline recorded)")
    else:
        target = next((a for a in led.attempts() if a.id == attempt_id), None)
        if target is None:
            return _fail(f"--id {attempt_id}: no such attempt in campaign {cfg.campaign}")
    kind = resolve(cfg.backend, cfg.family)
    if kind != "gpu":  # on demand, enabled: off does not stop it; only a backend that runs no kernel does
        why = skip_reason(cfg, kind, True)
        sys.stderr.write(f"evo: sanitizer not run (exit {EXIT_UNCHECKED}): {why}\n")
        result(attempt=target.id, checked=False, reason=why, tools={})
        return EXIT_UNCHECKED
    record = sanitize_attempt(cfg, led, target, champ.id if champ else None)
    write_log(led.attempts(), led.all_meta(), cfg.log_dir / "attempts.md")
    tools = record.get("tools") or {}
    unchecked = [t for t, r in tools.items() if (r or {}).get("status") == UNAVAILABLE]
    result(attempt=target.id, checked=not unchecked, failed=failed_tools(record), unchecked=unchecked, tools=tools)
    if failed_tools(record):
        return EXIT_PROBLEMS
    return EXIT_UNCHECKED if unchecked or not tools else 0


def _run_locked(cfg, args) -> int:
    """clocks: lock — only for a GPU the user owns; restored on every exit (and at next start after a SIGKILL)."""
    from harness.device import ClockLock, ClockLockError, Nvml, restore_stale_lock

    nvml = Nvml()
    marker = cfg.log_dir / "clock-lock.json"
    try:
        if restore_stale_lock(nvml, marker):
            print("evo: restored SM clocks left locked by a killed campaign")
        with ClockLock(nvml, cfg.lock_sm_mhz, marker):
            cfg.clocks = "record"
            return _run(cfg, args)
    except ClockLockError as e:
        return _fail(str(e))


def _selfcheck(cfg, aa: int) -> int:
    from evo.loop.campaign import Campaign, CampaignError
    from evo.loop.selfcheck import selfcheck
    from evo.report.logmd import write_log

    if aa < 1:
        return _fail("--aa must be >= 1")
    try:
        camp = Campaign(cfg, command="evo " + " ".join(sys.argv[1:]))
        camp.claim()
        try:
            out = selfcheck(camp, aa)
        finally:
            camp.ledger.release()
    except CampaignError as e:
        return _fail(str(e))
    sim = f" ({camp.label})" if camp.simulated else ""
    a = out["aa"]
    print(
        f"evo: A/A check{sim}: {a['accepted']} of {a['evaluations']} evaluations accepted; highest lower bound "
        f"{a['max_lower_bound']:.4f} against a threshold of {a['threshold']:.4f} (floor {a['floor']:.3%})"
    )
    for title, v in out["faults"].items():
        mark = {True: "right verdict", False: f"WRONG VERDICT (expected {v['expected']})", None: "needs a GPU"}[v["ok"]]
        print(f"evo: fault '{title}': {v['verdict']} [{mark}]: {v['reason'][:160]}")
    write_log(camp.ledger.attempts(), camp.ledger.all_meta(), cfg.log_dir / "attempts.md")
    bad = a["accepted"] > 0 or any(v["ok"] is False for v in out["faults"].values())
    unverified = [title for title, v in out["faults"].items() if v["ok"] is None]
    result(simulated=bool(camp.simulated), aa=a, faults=out["faults"], unverified=unverified)
    if bad:
        return EXIT_PROBLEMS
    if unverified:  # not a pass: a CI job must not read these faults as caught
        sys.stderr.write(
            f"evo: selfcheck: {len(unverified)} of {len(out['faults'])} fault(s) not verified here (they need a GPU); "
            f"exit {EXIT_UNCHECKED}\n"
        )
        return EXIT_UNCHECKED
    return 0


def _ablate(cfg, rounds: int | None) -> int:
    """`evo ablate`: the champion against each of its changes set back alone (evo/loop/ablate.py), recorded in the
    ledger meta; the table printed, and the attempt log rewritten with it."""
    from evo.loop.ablate import AblateError, ablate
    from evo.loop.campaign import Campaign, CampaignError
    from evo.report.ablation import table
    from evo.report.logmd import write_log

    if not _existing(cfg):
        return _fail(f"campaign {cfg.campaign} has no ledger yet at {cfg.storage} (start it with evo run)")
    if rounds is not None and rounds < 3:
        return _fail("--rounds: at least 3 (an interval needs them)")
    try:
        camp = Campaign(cfg, command="evo " + " ".join(sys.argv[1:]), replaying=True)
        camp.claim()
        try:
            record = ablate(camp, rounds)
        finally:
            camp.ledger.release()
    except (CampaignError, AblateError) as e:
        return _fail(str(e))
    sim = f" ({camp.label})" if camp.simulated else ""
    print(
        f"evo: ablation of champion #{record['champion']} on the {record['backend']} backend{sim}: {record['method']}"
    )
    for line in table(record):
        print(line)
    write_log(camp.ledger.attempts(), camp.ledger.all_meta(), cfg.log_dir / "attempts.md")
    return 0


def replay_gates() -> list[str]:
    """What `evo replay --gate` takes: a gate of a verdict code (static, correctness, perf, ...) or an error kind."""
    from evo.core.records import ERROR_KINDS, Code
    from gates.judge import gate_names

    gates = {c.gate for c in Code if c.gate and c.gate != "error"}
    # a gate registered from outside evo (entry point evo.gates) is a gate too: its rejections carry its name
    gates |= set(gate_names())
    return sorted(gates | set(ERROR_KINDS) | {"error"})


def _replay(cfg, gate: str | None, ids: list[int] | None) -> int:
    from evo.core.suggest import did_you_mean
    from evo.loop.campaign import Campaign, CampaignError
    from evo.loop.replay import replay
    from evo.report.logmd import write_log

    known = replay_gates()
    if gate is not None and gate not in known:
        return _fail(
            f"replay: --gate {gate!r} is no gate or error kind{did_you_mean(gate, known)} (known: {', '.join(known)})",
            EXIT_USAGE,
        )
    if not _existing(cfg):
        return _fail(f"campaign {cfg.campaign} has no ledger yet at {cfg.storage} (start it with evo run)")
    try:
        camp = Campaign(cfg, command="evo " + " ".join(sys.argv[1:]), replaying=True)
        camp.claim()
        try:
            pairs = replay(camp, gate=gate, ids=ids)
        finally:
            camp.ledger.release()
    except CampaignError as e:
        return _fail(str(e))
    sim = f" ({camp.label})" if camp.simulated else ""
    changed = [(o, n) for o, n in pairs if o.verdict.label() != n.verdict.label()]
    print(
        f"evo: replayed {len(pairs)} attempt(s) on the {camp.backend.name} backend{sim}; "
        f"{len(changed)} verdict(s) changed"
    )
    print(f"{'original':>9}  {'backend':<9} {'verdict then':<24} {'replay':>7}  {'verdict now':<24} reason now")
    for o, n in pairs:
        mark = "*" if o.verdict.label() != n.verdict.label() else " "
        print(
            f"{mark}{'#' + str(o.id):>8}  {o.backend:<9} {o.verdict.label():<24} {'#' + str(n.id):>7}  "
            f"{n.verdict.label():<24} {n.verdict.reason[:100]}"
        )
    write_log(camp.ledger.attempts(), camp.ledger.all_meta(), cfg.log_dir / "attempts.md")
    from evo.report.documents import attempt_brief

    result(
        simulated=bool(camp.simulated),
        replayed=[
            {
                "original": attempt_brief(o),
                "replay": attempt_brief(n),
                "changed": o.verdict.label() != n.verdict.label(),
            }
            for o, n in pairs
        ],
        changed=len(changed),
    )
    return 0


def _worker(cfg, args) -> int:
    """`evo worker`: the campaign loop on a shared storage (evo/loop/workers.py)."""
    from evo.loop.workers import cli_worker

    return cli_worker(cfg, args)


RUN = Command(_run_parser, _run)
WORKER = Command(_worker_parser, _worker)
REPLAY = Command(_replay_parser, lambda cfg, args: _replay(cfg, args.gate, args.ids))
SANITIZE = Command(_sanitize_parser, lambda cfg, args: _sanitize(cfg, args.id))
ABLATE = Command(_ablate_parser, lambda cfg, args: _ablate(cfg, args.rounds))
SELFCHECK = Command(_selfcheck_parser, lambda cfg, args: _selfcheck(cfg, args.aa))
