"""The live view of a running campaign (rich), or plain lines where no terminal is attached."""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from evo.core.records import ACCEPTED, BASELINE, SIMULATED_LABEL, Attempt
from evo.search.ideas import describe_change

NARROW = 116  # columns inside the panel (a 120-column console) below which a reason gets a line of its own


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
        self._champions: dict[int, Any] = {}  # id -> genome of the baseline and each accepted step seen
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
        # against the champion it was measured against (its parent), as the log says it; else the champion now
        ref = self._champions.get(a.parent_id) if a.parent_id is not None else None
        ref = ref or (self.champion.genome if self.champion is not None else self._baseline)
        change = "baseline" if a.verdict.status == BASELINE else (describe_change(a.genome, ref) if ref else "")
        self.recent.append((a, change))
        if a.verdict.status in (ACCEPTED, BASELINE):
            self.champion_id = a.id
            self.champion = a
            self._champions[a.id] = a.genome
            if a.verdict.status == BASELINE:
                self._baseline = a.genome
            for g, iv in a.speedup_vs_baseline.items():
                self.best[g] = iv
        if self._live is not None:
            self._live.update(self.render())
        else:  # the same change as the live view and the log show (it read against the baseline here before)
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
        title = "evo" + (f" — {self.label}" if self.simulated else "")
        return Panel(Group(head, _Recent(self)), title=title)

    def recent_rows(self, width: int) -> list[RenderableType]:
        """The last attempts in ``width`` columns: one row each with the reason as its last column where that is
        wide; below ``NARROW`` the reason gets a line of its own under its row (at 80 columns a reason column kept
        ~15 characters of it, where the reason is what says why)."""
        wide = width >= NARROW
        rows = list(reversed(self.recent))
        if wide or not rows:
            table = self._recent_table(reason=True)
            for a, change in rows:
                table.add_row(*self._cells(a, change), _short(a.verdict.reason, 400), style=self._style(a))
            return [table]
        out: list[RenderableType] = []
        for i, (a, change) in enumerate(rows):
            table = self._recent_table(reason=False, header=i == 0)
            table.add_row(*self._cells(a, change), style=self._style(a))
            out.append(table)
            reason = Text("     " + _short(a.verdict.reason, 400), style="dim", no_wrap=True, overflow="ellipsis")
            out.append(reason)
        return out

    @staticmethod
    def _recent_table(reason: bool, header: bool = True) -> Table:
        """The last attempts' columns; narrow (no reason column), the widths are fixed so that one table per attempt
        lines up with the next."""
        w = (None, None, None, None) if reason else (4, 8, 8, 20)  # #, µs, vs champ, verdict
        t = Table(box=None, show_edge=False, expand=True, pad_edge=False, show_header=header)
        t.add_column("#", no_wrap=True, justify="right", width=w[0])
        t.add_column("change", overflow="ellipsis", no_wrap=True, ratio=1 if reason else 3, min_width=8)
        t.add_column("µs", no_wrap=True, justify="right", width=w[1])  # at the anchor (the champion line names it)
        t.add_column("vs champ", no_wrap=True, justify="right", width=w[2])
        t.add_column("verdict", no_wrap=True, overflow="ellipsis", min_width=8, width=w[3])
        if reason:
            t.add_column("reason", overflow="ellipsis", no_wrap=True, ratio=2, min_width=8)
        return t

    def _cells(self, a: Attempt, change: str) -> tuple[str, ...]:
        us, vs = self._time(a)
        return str(a.id), change or "–", us, vs, a.verdict.label()

    @staticmethod
    def _style(a: Attempt) -> str | None:
        return "green" if a.verdict.status == ACCEPTED else ("red" if a.verdict.status == "error" else None)


class _Recent:
    """The last attempts' rows, laid out for the width they are drawn in (rich asks at each refresh)."""

    def __init__(self, progress: Progress):
        self.progress = progress

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self.progress.recent_rows(options.max_width)


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
