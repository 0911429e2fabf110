"""`evo peers`: the campaign's champion timed beside its peers again (``peer.kernels`` and torch.compile), as a run
does when it ends (evo/loop/peers.py); the record is appended to the ledger and the attempt log rewritten with it."""

from __future__ import annotations

import sys

from evo.cli.common import EXIT_PROBLEMS, Command, _existing, _fail, campaign_args


def _parser(sub) -> None:
    pe = sub.add_parser(
        "peers", help="the champion beside the config's peer kernels (and torch.compile), interleaved, again"
    )
    campaign_args(pe, backend=True)
    pe.add_argument("--rounds", type=int, help="interleaved rounds a geometry (default gates.perf.rounds)")


def _peers(cfg, rounds: int | None) -> int:
    """Time the peers beside the ledger's champion (the baseline where no step was accepted); exit 1 where no peer
    could be timed on this backend, or the timing failed."""
    from evo.core.records import BASELINE
    from evo.loop.campaign import Campaign, CampaignError
    from evo.loop.peers import time_peers
    from evo.report.logmd import write_log

    if not getattr(cfg.peer, "kernels", ()):
        return _fail("peer.kernels: the config names no peer kernel (docs/measurement.md, Peers)")
    if not _existing(cfg):
        return _fail(f"campaign {cfg.campaign} has no ledger yet at {cfg.storage} (start it with evo run)")
    if rounds is not None and rounds < 3:
        return _fail("--rounds: at least 3 (an interval needs them)")
    try:
        camp = Campaign(cfg, command="evo " + " ".join(sys.argv[1:]), replaying=True)
        camp.claim()
        try:
            led = camp.ledger
            champ = led.champion() or next((a for a in led.attempts() if a.verdict.status == BASELINE), None)
            if champ is None:
                return _fail(f"campaign {cfg.campaign} has no baseline attempt yet (start it with evo run)")
            record = time_peers(cfg, led, camp.modules, champ, camp.out, rounds)
        finally:
            camp.ledger.release()
    except CampaignError as e:
        return _fail(str(e))
    write_log(camp.ledger.attempts(), camp.ledger.all_meta(), cfg.log_dir / "attempts.md")
    timed = record is not None and record.get("geometries")
    return 0 if timed else EXIT_PROBLEMS


PEERS = Command(_parser, lambda cfg, args: _peers(cfg, args.rounds))
