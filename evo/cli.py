"""The `evo` command: run, status, log, families.

Every user error is one line on stderr and exit code 2; nothing recorded in a
campaign is touched by a failing command.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, no usage dump
        sys.stderr.write(f"evo: {message} (see evo --help)\n")
        sys.exit(EXIT_USAGE)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="evo", description="Evolutionary, gated search over CUDA kernel variants.")
    sub = p.add_subparsers(dest="cmd", metavar="command", parser_class=_Parser)
    r = sub.add_parser("run", help="start or resume a campaign")
    r.add_argument("config", help="campaign YAML, e.g. configs/mhc_pre_big_fuse.yaml")
    r.add_argument("--backend", choices=("auto", "gpu", "recorded"), help="override the config's backend")
    r.add_argument("--storage", help="override the config's storage URL")
    r.add_argument("--attempts", type=int, help="override budget.attempts")
    r.add_argument("--minutes", type=float, help="override budget.minutes")
    r.add_argument("--plain", action="store_true", help="one line per attempt instead of the live view")
    for name, help_ in (("status", "summarize a campaign"), ("log", "write the markdown attempt log")):
        s = sub.add_parser(name, help=help_)
        s.add_argument("config", help="campaign YAML")
        s.add_argument("--storage", help="override the config's storage URL")
        if name == "log":
            s.add_argument("-o", "--output", help="where to write (default logs/<campaign>/attempts.md)")
    e = sub.add_parser("export", help="accepted steps as a git-am patch series, plus the final kernel")
    e.add_argument("config", help="campaign YAML")
    e.add_argument("--storage", help="override the config's storage URL")
    e.add_argument("-o", "--output", help="folder (default logs/<campaign>/export)")
    rp = sub.add_parser("replay", help="re-judge rejected attempts on this machine with today's gates")
    rp.add_argument("config", help="campaign YAML")
    rp.add_argument("--storage", help="override the config's storage URL")
    rp.add_argument("--backend", choices=("auto", "gpu", "recorded"), help="override the config's backend")
    rp.add_argument("--gate", help="only attempts rejected by this gate (static, correctness, perf) or error kind")
    rp.add_argument("--id", type=int, action="append", dest="ids", help="only this attempt (repeatable)")
    c = sub.add_parser("selfcheck", help="A/A acceptance check and the family's deliberate faults")
    c.add_argument("config", help="campaign YAML")
    c.add_argument("--storage", help="override the config's storage URL")
    c.add_argument("--backend", choices=("auto", "gpu", "recorded"), help="override the config's backend")
    c.add_argument("--aa", type=int, default=50, help="A/A perf-gate evaluations (default 50)")
    sub.add_parser("families", help="list kernel families and their knobs")
    return p


def _fail(msg: str) -> int:
    sys.stderr.write(f"evo: {msg}\n")
    return EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.cmd is None:
        _parser().print_help()
        return EXIT_USAGE
    from evo.config import ConfigError, load_config

    try:
        if args.cmd == "families":
            return _families()
        cfg = load_config(args.config, backend_override=getattr(args, "backend", None),
                          storage_override=getattr(args, "storage", None))
        if args.cmd == "run":
            return _run(cfg, args)
        if args.cmd == "status":
            return _status(cfg)
        if args.cmd == "log":
            return _log(cfg, args.output)
        if args.cmd == "export":
            return _export(cfg, args.output)
        if args.cmd == "replay":
            return _replay(cfg, args.gate, args.ids)
        if args.cmd == "selfcheck":
            return _selfcheck(cfg, args.aa)
    except ConfigError as e:
        return _fail(f"config error: {e}")
    return EXIT_USAGE


def _families() -> int:
    from evo.family import FamilyError, family_names, load_family

    for name in family_names():
        try:
            fam = load_family(name)
        except FamilyError as e:
            print(f"{name}: cannot load ({e})")
            continue
        print(f"{fam.name}: {fam.description}")
        for k in fam.knobs:
            tag = "bit-preserving" if k.exact else "may change bits"
            vals = ", ".join(f"[{v}]" if v == k.default else str(v) for v in k.values)
            print(f"  {k.name:<14} {vals:<28} {tag:<16} {k.doc}")
    return 0


def _open_ledger(cfg):
    from evo.ledger import Ledger

    return Ledger(cfg.storage, cfg.campaign, cfg.family.knobs)


def _existing(cfg) -> bool:
    if cfg.storage.startswith("sqlite:///"):
        return Path(cfg.storage[len("sqlite:///"):]).is_file()
    return True


def _run(cfg, args) -> int:
    from evo.campaign import Campaign, CampaignError
    from evo.config import Budget, ConfigError
    from evo.logmd import write_log
    from evo.progress import Progress

    if args.attempts is not None or args.minutes is not None:
        if (args.attempts is not None and args.attempts < 1) or (args.minutes is not None and args.minutes <= 0):
            raise ConfigError("--attempts must be >= 1 and --minutes > 0")
        cfg.budget = Budget(args.attempts if args.attempts is not None else cfg.budget.attempts,
                            args.minutes if args.minutes is not None else cfg.budget.minutes)
    if cfg.clocks == "lock":
        return _run_locked(cfg, args)
    try:
        camp = Campaign(cfg, command="evo " + " ".join(sys.argv[1:]))
    except CampaignError as e:
        return _fail(str(e))
    sim = " — simulated from recorded H200 measurements" if camp.simulated else ""
    print(f"evo: campaign {cfg.campaign} ({cfg.family.name}) on the {camp.backend.name} backend{sim}")
    progress = Progress(cfg.campaign, cfg.budget, camp.simulated)
    if args.plain:
        progress.live_mode = False
    camp.on_attempt = progress
    try:
        with progress:
            summary = camp.run()
    except CampaignError as e:
        return _fail(str(e))
    log = cfg.log_dir / "attempts.md"
    write_log(camp.ledger.attempts(), camp.ledger.all_meta(), log)
    champ = summary.champion
    print(f"evo: stopped: {summary.stopped}; {summary.new_attempts} new attempt(s), {summary.attempts} recorded{sim}")
    if champ is not None:
        best = ", ".join(f"{g} {iv.fmt()}" for g, iv in champ.speedup_vs_baseline.items()) or "baseline"
        print(f"evo: champion #{champ.id}: {best} vs baseline{sim}")
    print(f"evo: attempt log: {log}")
    return 0


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
    from evo.campaign import Campaign, CampaignError, selfcheck
    from evo.logmd import write_log

    if aa < 1:
        return _fail("--aa must be >= 1")
    try:
        camp = Campaign(cfg, command="evo " + " ".join(sys.argv[1:]))
        out = selfcheck(camp, aa)
    except CampaignError as e:
        return _fail(str(e))
    sim = " (simulated from recorded H200 measurements)" if camp.simulated else ""
    a = out["aa"]
    print(f"evo: A/A check{sim}: {a['accepted']} of {a['evaluations']} evaluations accepted; highest lower bound "
          f"{a['max_lower_bound']:.4f} against a threshold of {a['threshold']:.4f} (floor {a['floor']:.3%})")
    for title, v in out["faults"].items():
        print(f"evo: fault '{title}': {v['verdict']}: {v['reason']}")
    write_log(camp.ledger.attempts(), camp.ledger.all_meta(), cfg.log_dir / "attempts.md")
    bad = a["accepted"] > 0 or any(v["verdict"] not in ("rejected: correctness", "skipped") for v in out["faults"].values())
    return 1 if bad else 0


def _export(cfg, output: str | None) -> int:
    from evo.export import export

    if not _existing(cfg):
        return _fail(f"campaign {cfg.campaign} has no ledger yet at {cfg.storage} (start it with evo run)")
    led = _open_ledger(cfg)
    out = Path(output) if output else cfg.log_dir / "export"
    try:
        patches = export(cfg.family, led.attempts(), led.all_meta(), out)
    except ValueError as e:
        return _fail(str(e))
    print(f"evo: {len(patches)} patch(es) and the final {cfg.family.name}.cu written to {out}")
    print(f"evo: apply with: git am {out}/*.patch  (onto {out}/baseline-{cfg.family.name}.cu committed as "
          f"{cfg.family.name}.cu)")
    return 0


def _replay(cfg, gate: str | None, ids: list[int] | None) -> int:
    from evo.campaign import Campaign, CampaignError, replay
    from evo.logmd import write_log

    if not _existing(cfg):
        return _fail(f"campaign {cfg.campaign} has no ledger yet at {cfg.storage} (start it with evo run)")
    try:
        camp = Campaign(cfg, command="evo " + " ".join(sys.argv[1:]), replaying=True)
        pairs = replay(camp, gate=gate, ids=ids)
    except CampaignError as e:
        return _fail(str(e))
    sim = " (simulated from recorded H200 measurements)" if camp.simulated else ""
    changed = [(o, n) for o, n in pairs if o.verdict.label() != n.verdict.label()]
    print(f"evo: replayed {len(pairs)} attempt(s) on the {camp.backend.name} backend{sim}; {len(changed)} verdict(s) changed")
    print(f"{'original':>9}  {'backend':<9} {'verdict then':<24} {'replay':>7}  {'verdict now':<24} reason now")
    for o, n in pairs:
        mark = "*" if o.verdict.label() != n.verdict.label() else " "
        print(f"{mark}{'#' + str(o.id):>8}  {o.backend:<9} {o.verdict.label():<24} {'#' + str(n.id):>7}  "
              f"{n.verdict.label():<24} {n.verdict.reason[:100]}")
    write_log(camp.ledger.attempts(), camp.ledger.all_meta(), cfg.log_dir / "attempts.md")
    return 0


def _status(cfg) -> int:
    from evo.logmd import render_status

    if not _existing(cfg):
        return _fail(f"campaign {cfg.campaign} has no ledger yet at {cfg.storage} (start it with evo run)")
    led = _open_ledger(cfg)
    print(render_status(led.attempts(), led.all_meta()))
    return 0


def _log(cfg, output: str | None) -> int:
    from evo.logmd import write_log

    if not _existing(cfg):
        return _fail(f"campaign {cfg.campaign} has no ledger yet at {cfg.storage} (start it with evo run)")
    led = _open_ledger(cfg)
    path = Path(output) if output else cfg.log_dir / "attempts.md"
    write_log(led.attempts(), led.all_meta(), path)
    print(f"evo: attempt log written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
