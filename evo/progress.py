"""The live view of a running campaign (rich), or plain lines where no terminal is attached."""

from __future__ import annotations

from collections import Counter, deque
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table

from evo.ideas import describe_change
from evo.records import ACCEPTED, Attempt


def _short(s: str, n: int = 90) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"


class Progress:
    """Receives every recorded attempt; draws attempts, verdict counts, best speedups and the last verdicts."""

    def __init__(self, campaign: str, budget: Any, simulated: bool, console: Console | None = None, last: int = 8):
        self.console = console or Console()
        self.live_mode = self.console.is_terminal
        self.campaign = campaign
        self.budget = budget
        self.simulated = simulated
        self.counts: Counter[str] = Counter()
        self.recent: deque[Attempt] = deque(maxlen=last)
        self.best: dict[str, Any] = {}
        self.champion_id: int | None = None
        self.n = 0
        self._live: Live | None = None
        self._baseline: dict[str, Any] = {}

    def __enter__(self) -> Progress:
        if self.live_mode:
            self._live = Live(self.render(), console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.update(self.render())
            self._live.__exit__(*exc)

    def __call__(self, a: Attempt, campaign: Any = None) -> None:
        self.n += 1
        self.counts[a.verdict.label()] += 1
        self.recent.append(a)
        if a.verdict.status in (ACCEPTED, "baseline"):
            self.champion_id = a.id
            if a.verdict.status == "baseline":
                self._baseline = a.genome
            for g, iv in a.speedup_vs_baseline.items():
                self.best[g] = iv
        if self._live is not None:
            self._live.update(self.render())
        else:
            change = describe_change(a.genome, self._baseline) if self._baseline else ""
            # markup=False: rich took "[simulated]" (and any [..] in a reason) for a style tag and dropped it.
            sim = " [simulated from recorded H200 measurements]" if self.simulated else ""
            self.console.print(
                f"#{a.id:<4} {a.verdict.label():<22} {_short(change, 60):<60} {_short(a.verdict.reason, 110)}{sim}",
                highlight=False,
                soft_wrap=True,
                markup=False,
            )

    def render(self) -> Panel:
        head = Table.grid(padding=(0, 2))
        budget = []
        if self.budget.attempts:
            budget.append(f"{self.n}/{self.budget.attempts} attempts")
        if self.budget.minutes:
            budget.append(f"{self.budget.minutes:g} min budget")
        head.add_row("campaign", self.campaign)
        head.add_row("progress", ", ".join(budget) or str(self.n))
        head.add_row("verdicts", ", ".join(f"{k}: {v}" for k, v in sorted(self.counts.items())) or "–")
        head.add_row("champion", f"#{self.champion_id}" if self.champion_id is not None else "–")
        head.add_row("best vs baseline", ", ".join(f"{g} {iv.fmt()}" for g, iv in self.best.items()) or "–")
        recent = Table("#", "verdict", "origin", "reason", box=None, show_edge=False)
        for a in reversed(self.recent):
            style = "green" if a.verdict.status == ACCEPTED else ("red" if a.verdict.status == "error" else None)
            recent.add_row(
                str(a.id), a.verdict.label(), _short(a.origin, 50), _short(a.verdict.reason, 80), style=style
            )
        title = "evo" + (" — simulated from recorded H200 measurements" if self.simulated else "")
        return Panel(Group(head, recent), title=title)


def run_with_progress(camp, live: bool = True):
    """Run a campaign (or a worker) with the progress view attached; CampaignError passes through."""
    progress = Progress(camp.cfg.campaign, camp.cfg.budget, camp.simulated)
    progress.live_mode = progress.live_mode and live
    camp.on_attempt = progress
    with progress:
        return camp.run()


def print_champion(summary, sim: str) -> None:
    champ = summary.champion
    if champ is not None:
        best = ", ".join(f"{g} {iv.fmt()}" for g, iv in champ.speedup_vs_baseline.items()) or "baseline"
        print(f"evo: champion #{champ.id}: {best} vs baseline{sim}")
