"""Issue 45 ("Nothing lost, round two"), the items the first round left: the campaign's own ideas writer never goes
through a symlink, a foreign ``-wal`` beside a WAL-mode ledger, a lock wait under a stop request, the family's other
hooks isolated in `evo run`, and no message naming a temporary file that is gone.

Each test reproduces its case on the code before the fix."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from evo.loop.campaign import Campaign
from evo.search.ideas import Idea, make_patch

ROOT = Path(__file__).resolve().parent.parent


def _idea(slug: str) -> Idea:
    src = "__global__ void k() {}\n"
    return Idea(slug=slug, title="t", rationale="r", patch=make_patch(src, "#pragma unroll\n" + src))


def _writer(log_dir: Path) -> tuple[SimpleNamespace, list[str]]:
    out: list[str] = []
    return SimpleNamespace(cfg=SimpleNamespace(log_dir=log_dir), out=out.append), out


def test_the_campaigns_ideas_writer_never_writes_through_a_symlink_or_over_a_users_file(tmp_path):
    """Before: ``(log/ideas/<slug>.patch).write_text`` followed a symlink there (the user's file it points at was
    overwritten) and replaced a file the user had put there."""
    ideas = tmp_path / "log" / "ideas"
    ideas.mkdir(parents=True)
    precious = tmp_path / "precious.txt"
    precious.write_text("the user's\n")
    (ideas / "linked.patch").symlink_to(precious)
    (ideas / "mine.patch").write_text("my draft\n")
    camp, out = _writer(tmp_path / "log")
    Campaign._write_ideas(camp, [_idea("linked"), _idea("mine"), _idea("fresh")])  # type: ignore[arg-type]
    assert precious.read_text() == "the user's\n" and (ideas / "linked.patch").is_symlink()
    assert (ideas / "mine.patch").read_text() == "my draft\n"
    assert "+#pragma unroll" in (ideas / "fresh.patch").read_text()
    warned = [line for line in out if line.startswith("warning: could not write idea")]
    assert len(warned) == 2 and "symlink" in warned[0] and "not written by evo" in warned[1], out
    # What evo wrote there itself it writes again (a resumed campaign's proposer answers the same slug).
    Campaign._write_ideas(camp, [_idea("fresh")])  # type: ignore[arg-type]
    assert len(out) == 2
