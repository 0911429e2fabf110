"""The campaign's source-level ideas (evo/search/ideas.py) against its ledger: read at start, frozen at set-up,
written with the first attempt that uses one, and an outside proposer's new ones written beside the log.

A measured idea may not change its text (like a changed knob): ``read_ideas`` says which did, and the campaign
refuses to resume.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from evo.search.ideas import campaign_book, idea_slugs


def read_ideas(cfg: Any, ledger: Any) -> tuple[dict[str, Any], list[str]]:
    """The ideas this campaign may build (the family's folder, the ledger's frozen ones, those its attempts used),
    and the slugs of measured ideas whose text changed since. Called once, as the campaign is made."""
    used = {s for a in ledger.attempts() for s in idea_slugs(a.genome)}
    folder = cfg.ideas.folder if cfg.ideas is not None else True
    return campaign_book(cfg.family, ledger.meta("ideas"), used, folder=folder)


def freeze_ideas(ledger: Any, ideas: Mapping[str, Any]) -> None:
    """At set-up: the folder's ideas into the ledger (new ones are accepted; a measured one keeps its text)."""
    frozen = ledger.meta("ideas") or {}
    add = {s: i.to_record() for s, i in ideas.items() if frozen.get(s, {}).get("patch") != i.patch}
    if add:
        ledger.set_meta("ideas", {**frozen, **add})


def ideas_meta(ledger: Any, ideas: Mapping[str, Any], genome: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ledger's frozen ideas plus any this genome uses for the first time (written with its attempt)."""
    slugs = idea_slugs(genome)
    if not slugs:  # a knob genome: no read of the ledger's ideas
        return None
    frozen = ledger.meta("ideas") or {}
    missing = [s for s in slugs if s not in frozen and s in ideas]
    if not missing:
        return None
    return {"ideas": {**frozen, **{s: ideas[s].to_record() for s in missing}}}


def write_ideas(log_dir: Any, ideas: Iterable[Any], out: Callable[[str], None]) -> None:
    """Ideas an outside proposer made, as patch files beside the log (``evo idea add`` takes them); never over a
    symlink or a file evo did not write there (evo/search/idea_files.py), only a warning then."""
    from evo.search.idea_files import IdeaFileError, write_file

    for idea in ideas:
        try:
            write_file(log_dir / "ideas", f"{idea.slug}.patch", idea.text(), force=True)
        except (OSError, IdeaFileError) as e:
            out(f"warning: could not write idea {idea.slug} beside the log: {e}")
