"""The live view of a running campaign (rich), or plain lines where no terminal is attached."""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table

from evo.core.records import ACCEPTED, BASELINE, SIMULATED_LABEL, Attempt
from evo.search.ideas import describe_change


def _short(s: str, n: int = 90) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    h, rest = divmod(seconds, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}h{m:02d}m{sec:02d}s" if h else f"{m}m{sec:02d}s"


class Progress:
    """Receives every recorded attempt; draws the budget (used, elapsed, left), the champion so far, verdict counts
    and the last attempts, each with its change against the champion it was measured against, its time, and its
    verdict, within the console's width (long cells end in an ellipsis)."""

    def __init__(
        self,
        campaign: str,
        budget: Any,
        simulated: bool,
        console: Console | None = None,
        last: int = 8,
        geometries: Sequence[Any] = (),
        elapsed_before: float = 0.0,
        counted_before: Iterable[int] = (),
        clock: Callable[[], float] = time.monotonic,
        label: str = SIMULATED_LABEL,
    ):
        self.console = console or Console()
        self.live_mode = self.console.is_terminal
        self.campaign = campaign
        self.budget = budget
        self.simulated = simulated
        self.label = label  # where a simulated run's numbers come from (evo.core.records.simulated_label)
        self.counts: Counter[str] = Counter()
        self.recent: deque[tuple[Attempt, str]] = deque(maxlen=last)  # (attempt, its change vs its champion)
        self.best: dict[str, Any] = {}
        self.champion_id: int | None = None
        self.champion: Attempt | None = None
        self.n = 0
        self._live: Live | None = None
        self._baseline: dict[str, Any] = {}
        # the first weighted geometry: the time each attempt row shows
        self.anchor = next((g.name for g in geometries if g.weight > 0), None)
        self.elapsed_before = elapsed_before  # a resumed campaign's budget.minutes counts its earlier sessions
        self._ids = set(counted_before)  # attempts already counted against the budget (a resume's)
        self._clock = clock
        self._t0 = clock()

    def __enter__(self) -> Progress:
        self._t0 = self._clock()
        if self.live_mode:
            self._live = Live(self.render(), console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.update(self.render())
            self._live.__exit__(*exc)

    def elapsed(self) -> float:
        return self.elapsed_before + self._clock() - self._t0

    def __call__(self, a: Attempt, campaign: Any = None) -> None:
        self.n += 1
        if a.verdict.kind != "interrupted":
            self._ids.add(a.id)
        self.counts[a.verdict.label()] += 1
        ref = self.champion.genome if self.champion is not None else self._baseline
        change = "baseline" if a.verdict.status == BASELINE else (describe_change(a.genome, ref) if ref else "")
        self.recent.append((a, change))
        if a.verdict.status in (ACCEPTED, BASELINE):
            self.champion_id = a.id
            self.champion = a
            if a.verdict.status == BASELINE:
                self._baseline = a.genome
            for g, iv in a.speedup_vs_baseline.items():
                self.best[g] = iv
        if self._live is not None:
            self._live.update(self.render())
        else:
            change = describe_change(a.genome, self._baseline) if self._baseline else ""
            # markup=False: rich took "[simulated]" (and any [..] in a reason) for a style tag and dropped it.
            sim = f" [{self.label}]" if self.simulated else ""
            self.console.print(
                f"#{a.id:<4} {a.verdict.label():<22} {_short(change, 60):<60} {_short(a.verdict.reason, 110)}{sim}",
                highlight=False,
                soft_wrap=True,
                markup=False,
            )

    def _budget(self) -> str:
        used, el = len(self._ids), self.elapsed()
        parts = []
        if self.budget.attempts:
            parts.append(f"{used}/{self.budget.attempts} attempts ({max(0, self.budget.attempts - used)} left)")
        else:
            parts.append(f"{used} attempts")
        if self.budget.minutes:
            left = self.budget.minutes * 60 - el
            parts.append(f"elapsed {_clock(el)} of {self.budget.minutes:g} min ({_clock(left)} left)")
        else:
            parts.append(f"elapsed {_clock(el)}")
        return ", ".join(parts)

    def _time(self, a: Attempt) -> tuple[str, str]:
        """The attempt's time at the anchor geometry and its speedup against the champion it was measured against."""
        g = self.anchor if self.anchor in a.timings else next(iter(a.timings), None)
        if g is None:
            return "–", "–"
        iv = a.speedup_vs_parent.get(g)
        return f"{a.timings[g].median_us:.2f}", (f"{iv.value:.3f}x" if iv is not None else "–")

    def _champion(self) -> str:
        c = self.champion
        if c is None:
            return "–"
        us, _ = self._time(c)
        best = ", ".join(f"{g} {iv.value:.3f}x" for g, iv in c.speedup_vs_baseline.items())
        where = f" at {self.anchor}" if self.anchor and self.anchor in c.timings else ""
        return f"#{c.id}: {us} µs{where}" + (f"; vs baseline {best}" if best else " (the baseline)")

    def render(self) -> Panel:
        head = Table.grid(padding=(0, 2), expand=True)
        head.add_column(no_wrap=True, style="bold")
        head.add_column(overflow="ellipsis", no_wrap=True, ratio=1)
        head.add_row("campaign", self.campaign)
        head.add_row("budget", self._budget())
        head.add_row("champion", self._champion())
        head.add_row("verdicts", ", ".join(f"{k}: {v}" for k, v in sorted(self.counts.items())) or "–")
        recent = Table(box=None, show_edge=False, expand=True, pad_edge=False)
        recent.add_column("#", no_wrap=True, justify="right")
        recent.add_column("change", overflow="ellipsis", no_wrap=True, ratio=3, min_width=8)
        recent.add_column("µs", no_wrap=True, justify="right")  # at the anchor (the champion line names it)
        recent.add_column("vs champ", no_wrap=True, justify="right")
        recent.add_column("verdict", no_wrap=True, overflow="ellipsis", min_width=8)
        recent.add_column("reason", overflow="ellipsis", no_wrap=True, ratio=2, min_width=8)
        for a, change in reversed(self.recent):
            style = "green" if a.verdict.status == ACCEPTED else ("red" if a.verdict.status == "error" else None)
            us, vs = self._time(a)
            recent.add_row(
                str(a.id), change or "–", us, vs, a.verdict.label(), _short(a.verdict.reason, 400), style=style
            )
        title = "evo" + (f" — {self.label}" if self.simulated else "")
        return Panel(Group(head, recent), title=title)


def run_with_progress(camp, live: bool = True):
    """Run a campaign (or a worker) with the progress view attached; CampaignError passes through."""
    led = camp.ledger
    progress = Progress(
        camp.cfg.campaign,
        camp.cfg.budget,
        camp.simulated,
        geometries=camp.cfg.geometries,
        elapsed_before=float(led.meta("elapsed_s") or 0.0),
        counted_before=[a.id for a in led.attempts() if a.verdict.kind != "interrupted"],
        label=getattr(camp, "label", SIMULATED_LABEL),
    )
    progress.live_mode = progress.live_mode and live
    camp.on_attempt = progress
    with progress:
        return camp.run()


def print_champion(summary, sim: str) -> None:
    champ = summary.champion
    if champ is not None:
        best = ", ".join(f"{g} {iv.fmt()}" for g, iv in champ.speedup_vs_baseline.items()) or "baseline"
        print(f"evo: champion #{champ.id}: {best} vs baseline{sim}")
