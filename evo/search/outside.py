"""Ideas in the search: idea genes switched on and off, and an outside proposer that answers with patches.

:class:`IdeaLayer` wraps the campaign's knob proposer (any strategy) when the
config has an ``ideas:`` section (and whenever the ledger holds idea genomes):

* With chance ``ideas.toggle`` it switches one registered idea (the family's
  ``ideas/`` folder, plus the ideas the campaign's outside proposer made) on
  or off on the current champion.
* Otherwise the knob proposer searches the knobs *in the champion's idea
  context*: it sees every attempt with its idea genes taken off, proposes a
  knob genome, and the layer puts the champion's ideas back on. Strategies
  need not know ideas exist, and the Optuna distributions stay the knobs'.
* Every ``ideas.proposer.every`` attempts it asks the outside command.

The config section (absent: no idea genes are proposed, though ideas already
in the ledger still build, e.g. for ``evo replay``)::

    ideas:
      toggle: 0.2          # chance per attempt of switching one idea on or off on the champion (0..1)
      folder: true         # use candidates/<family>/ideas/ (false: only ideas the outside proposer makes)
      proposer:            # optional
        command: [python, -m, evo.search.rules]   # an argv list, never a shell string
        every: 4           # ask it for one attempt in every 4 (default 1)
        timeout_s: 120     # a hang past it is killed (with its process group) and recorded
        max_failures: 3    # failed answers in a row after which it is not asked again this session
        env: {}            # extra environment for the command

The outside proposer protocol
-----------------------------

The command (an argv list; ``python`` means this interpreter) runs in a fresh
scratch folder that holds

* ``kernel.cu``: the champion's source with its ideas applied and the knob
  conditionals still in place. **The answer is a patch against this file.**
* ``resolved.cu``: the same with the champion's knob values resolved (what the
  champion actually compiles; easier to read);
* ``request.json``: the family (knobs with values, defaults and docs), the
  champion (id, genome, ideas, speedups), every idea with its verdicts, the
  change signatures already tried (``tried_change_sha256``), and the attempt
  history (id, origin, change, verdict, code, reason, score; ``code`` is the
  verdict's ``evo.core.records.Code`` value, the reason its words). Both sources are
  inside it too (``kernel_cu``, ``resolved_cu``).

``request.json`` is also written to the command's stdin; ``EVO_IDEA_DIR`` and
``EVO_IDEA_REQUEST`` name the folder and the file. The command answers on
stdout with either

* a unified diff against ``kernel.cu``, optionally preceded by ``Title:``,
  ``Rationale:`` and ``Exact: yes|no`` lines, or
* a JSON object ``{"title": ..., "rationale": ..., "exact": true, "patch": "<diff>"}``,

or with nothing at all (exit 0) when it has no idea; the knob proposer then
makes this attempt. The answer is gated like any idea: a patch that does not
apply to the champion is ``error: idea`` (with the failing hunk), one that does
not compile is ``error: compile``, one that computes the wrong result is
``rejected: correctness``. An answer that is not a patch, a command that runs
past ``timeout_s`` (its whole process group is killed) and one that exits
non-zero are each recorded as ``error: proposer`` with the reason, and the
campaign goes on; after ``max_failures`` failures in a row the command is not
asked again this session.

An accepted answer becomes an idea of the campaign (frozen in its ledger, and
written to ``logs/<campaign>/ideas/<slug>.patch``; ``evo idea add`` promotes it
to the family's folder). A patch that applies to the baseline alone is stored
as its own idea and combined with the champion's; one that only applies on top
of the champion's ideas is stored with them folded in.

The built-in rule-based proposer needs no network::

    ideas:
      toggle: 0.2
      proposer: {command: [python, -m, evo.search.rules], every: 4, timeout_s: 60}

Plugging in a language model
----------------------------

Any command that follows the protocol works; a thin script around a model's
API is enough. For example ``tools/ask_llm.py`` (not shipped; the endpoint,
model and key are yours)::

    import json, os, sys, urllib.request
    req = json.load(sys.stdin)
    prompt = ("You optimize CUDA kernels. Propose ONE source change to kernel.cu that makes it faster "
              "without changing its output bits. Answer with 'Title:', 'Rationale:' and 'Exact: yes|no' "
              "lines, a blank line, then a unified diff against kernel.cu (--- a/kernel.cu / +++ b/kernel.cu).\\n"
              f"Already tried (do not repeat): {json.dumps(req['ideas'])[:20000]}\\n"
              f"Recent attempts: {json.dumps(req['history'][-40:])}\\n"
              f"kernel.cu:\\n{req['kernel_cu']}")
    body = json.dumps({"model": os.environ["LLM_MODEL"], "messages": [{"role": "user", "content": prompt}]})
    r = urllib.request.Request(os.environ["LLM_URL"], body.encode(), {
        "Content-Type": "application/json", "Authorization": "Bearer " + os.environ["LLM_API_KEY"]})
    answer = json.load(urllib.request.urlopen(r, timeout=300))["choices"][0]["message"]["content"]
    print(answer.split("```diff")[-1].split("```")[0] if "```diff" in answer else answer)

and in the campaign config::

    ideas:
      proposer:
        command: [python, tools/ask_llm.py]
        every: 5
        timeout_s: 600
        env: {LLM_MODEL: my-model, LLM_URL: "https://.../v1/chat/completions"}

(``LLM_API_KEY`` comes from the environment evo runs in; keep keys out of configs.)
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import signal
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evo.core.family import Family, Geometry
from evo.core.genome import Genome
from evo.core.records import ACCEPTED, BASELINE, Attempt, Verdict
from evo.search.base import Proposal, Proposer
from evo.search.ideas import (
    Idea,
    IdeaError,
    apply_ideas,
    describe_change,
    idea_events,
    idea_slugs,
    knob_part,
    make_patch,
    normalize_patch,
    slugify,
    split_headers,
    toggled,
    with_ideas,
)
from evo.search.resolve import resolved_kernel
from harness.build import PatchError, apply_patch

MAX_ANSWER = 1 << 20  # bytes of stdout read from the command


@dataclass
class IdeaProposal(Proposal):
    """A proposal that brings new ideas with it, or a failed outside answer to record as is."""

    new_ideas: list[Idea] = field(default_factory=list)
    failure: Verdict | None = None  # set: record this verdict without building anything
    notes: list[str] = field(default_factory=list)


class ProposerFailure(Exception):
    """The outside command failed: hung, exited non-zero, or answered something that is not a patch."""


@dataclass
class Answer:
    title: str
    rationale: str
    exact: bool
    patch: str


# ---------------------------------------------------------------------------
# Running the command


def run_command(
    argv: Sequence[str],
    request: Mapping[str, Any],
    files: Mapping[str, str],
    timeout_s: float,
    env: Mapping[str, str] | None = None,
) -> str:
    """Run the proposer in a scratch folder; return its stdout. Raises ProposerFailure (one line)."""
    text = json.dumps(request, indent=1, sort_keys=True, default=str)
    with tempfile.TemporaryDirectory(prefix="evo-proposer-") as td:
        d = Path(td)
        for name, body in files.items():
            (d / name).write_text(body)
        (d / "request.json").write_text(text)
        # The command may import evo (the built-in rules do): this evo first, whatever the scratch folder holds.
        root = str(Path(__file__).resolve().parents[2])
        e = {**os.environ, **(env or {}), "EVO_IDEA_DIR": str(d), "EVO_IDEA_REQUEST": str(d / "request.json")}
        e["PYTHONPATH"] = os.pathsep.join(x for x in (root, e.get("PYTHONPATH", "")) if x)
        try:
            proc = subprocess.Popen(
                list(argv),
                cwd=d,
                env=e,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as err:
            raise ProposerFailure(f"cannot start {argv[0]}: {err.strerror or err}") from None
        try:
            out, err_b = proc.communicate(text.encode(), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise ProposerFailure(f"no answer within {timeout_s:g} s: the command was killed") from None
        except BaseException:
            _kill_group(proc)
            raise
        finally:
            _kill_group(proc, only_children=True)
        if proc.returncode != 0:
            tail = " | ".join(ln.strip() for ln in err_b.decode(errors="replace").splitlines() if ln.strip())
            how = (
                f"was killed by signal {-proc.returncode}"
                if proc.returncode < 0
                else f"exited with status {proc.returncode}"
            )
            raise ProposerFailure(f"the command {how}" + (f": {tail[-300:]}" if tail else " (no stderr)"))
        return out[:MAX_ANSWER].decode(errors="replace")


def _kill_group(proc: subprocess.Popen, only_children: bool = False) -> None:
    """Kill the process group this proposer was started in (it leads its own session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if not only_children:
        try:
            proc.communicate(timeout=5)
        except Exception:
            pass


def parse_answer(stdout: str) -> Answer | None:
    """The command's stdout -> Answer; None when it said nothing; ProposerFailure when it is not a patch."""
    text = stdout.strip("\ufeff")
    if not text.strip():
        return None
    if text.lstrip().startswith("{"):
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise ProposerFailure(f"the answer looks like JSON but does not parse: {e}") from None
        if not isinstance(d, dict) or not isinstance(d.get("patch"), str):
            raise ProposerFailure('the JSON answer has no "patch" string (expected {title, rationale, exact, patch})')
        ex = d.get("exact", True)
        return Answer(
            str(d.get("title") or ""),
            str(d.get("rationale") or ""),
            ex if isinstance(ex, bool) else str(ex).lower() in ("yes", "true"),
            d["patch"],
        )
    headers, diff = split_headers(text)
    if not diff:
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        raise ProposerFailure(
            f"the answer is not a unified diff (no '--- a/kernel.cu' line; it starts with {first[:80]!r})"
        )
    return Answer(
        headers.get("title", ""),
        headers.get("rationale", ""),
        headers.get("exact", "yes").strip().lower() in ("yes", "true"),
        diff,
    )


# ---------------------------------------------------------------------------
# The layer


def command_name(argv: Sequence[str]) -> str:
    """A short name for the command: the module of ``python -m x``, the script of ``python x.py``, else argv[0]."""
    if len(argv) > 2 and argv[1] == "-m":
        return argv[2]
    if len(argv) > 1 and Path(argv[0]).name.startswith("python"):
        return Path(argv[1]).name
    return Path(argv[0]).name


def champion_of(attempts: Sequence[Attempt]) -> Attempt | None:
    return next((a for a in reversed(attempts) if a.verdict.status == ACCEPTED), None) or next(
        (a for a in attempts if a.verdict.status == BASELINE), None
    )


def _project(a: Attempt) -> Attempt:
    if not idea_slugs(a.genome):
        return a
    g = knob_part(a.genome)
    return dataclasses.replace(a, genome=dict(g), genome_key=g.key)


class IdeaLayer:
    """Wraps a knob proposer: idea toggles, the knob search in the champion's idea context, the outside command."""

    def __init__(
        self,
        inner: Proposer,
        family: Family,
        geometries: Sequence[Geometry],
        book: dict[str, Idea],
        settings: Any,
        seed: int,
        source_for: Callable[[Mapping[str, Any]], str],
        out: Callable[[str], None] = print,
    ):
        self.inner = inner
        self.family = family
        self.geometries = list(geometries)
        self.book = book  # shared with the campaign, which adds the ideas it records
        self.settings = settings  # IdeasConfig or None
        self.rng = random.Random(seed ^ 0x1DEA)
        self.source_for = source_for
        self.out = out
        self.asked = 0
        self.failures = 0
        self.disabled = False

    # the campaign sets the tabu on the proposer it holds
    @property
    def tabu(self) -> dict[str, set[Any]]:
        return self.inner.tabu

    @tabu.setter
    def tabu(self, value: dict[str, set[Any]]) -> None:
        self.inner.tabu = value

    @property
    def outside(self) -> Any:
        return getattr(self.settings, "proposer", None) if self.settings is not None else None

    def propose(self, attempts: Sequence[Attempt], seen: set[str]) -> Proposal | None:
        champ = champion_of(attempts)
        o = self.outside
        if o is not None and not self.disabled and champ is not None:
            self.asked += 1
            if (self.asked - 1) % o.every == 0:
                asked = self.ask_outside(attempts, seen, champ)
                if asked is not None:
                    return asked
        toggle = getattr(self.settings, "toggle", 0.0) if self.settings is not None else 0.0
        if toggle > 0 and champ is not None and self.book and self.rng.random() < toggle:
            p = self.toggle(champ, seen)
            if p is not None:
                return p
        return self.knobs(attempts, seen, champ)

    def toggle(self, champ: Attempt, seen: set[str]) -> Proposal | None:
        on = set(idea_slugs(champ.genome))
        options = [(s, toggled(champ.genome, s)) for s in sorted(set(self.book) | on)]
        options = [(s, g) for s, g in options if g.key not in seen and self.inner.valid(knob_part(g), set())]
        if not options:
            return None
        slug, g = self.rng.choice(options)
        idea = self.book.get(slug)
        what = f"+idea {slug}" if slug not in on else f"-idea {slug}"
        return Proposal(g, f"idea toggle on #{champ.id}: {what}" + (f" ({idea.title})" if idea else ""), [champ.id])

    def knobs(self, attempts: Sequence[Attempt], seen: set[str], champ: Attempt | None) -> Proposal | None:
        """The knob proposer, in the champion's idea context (transparent when no genome carries an idea)."""
        ctx = idea_slugs(champ.genome) if champ is not None else []
        if not ctx and not any(idea_slugs(a.genome) for a in attempts) and not any("idea:" in k for k in seen):
            return self.inner.propose(attempts, seen)
        projected = [_project(a) for a in attempts]
        seen_ctx = set()
        for k in seen:
            g = Genome.from_key(k)
            if idea_slugs(g) == ctx:
                seen_ctx.add(knob_part(g).key)
        p = self.inner.propose(projected, seen_ctx)
        if p is None and ctx and champ is not None:
            return self.toggle(champ, seen)  # this idea context is used up: move to another
        if p is None or not ctx:
            return p
        return Proposal(with_ideas(p.genome, ctx), f"{p.origin} (with ideas {', '.join(ctx)})", list(p.derived_from))

    # --- the outside command ---------------------------------------------------
    def request(self, attempts: Sequence[Attempt], champ: Attempt, source: str, resolved: str) -> dict[str, Any]:
        by_id = {a.id: a for a in attempts}
        history = []
        for a in attempts[-300:]:
            parent = by_id.get(a.parent_id) if a.parent_id is not None else None
            history.append(
                {
                    "id": a.id,
                    "origin": a.origin,
                    "verdict": a.verdict.label(),
                    "code": a.verdict.code.value,
                    "reason": a.verdict.reason,
                    "change": describe_change(a.genome, parent.genome) if parent else "baseline",
                    "score": a.score,
                    "genome": a.genome,
                    "speedup_vs_baseline": {g: iv.value for g, iv in a.speedup_vs_baseline.items()},
                }
            )
        events: dict[str, list[dict[str, Any]]] = {}
        for ev in idea_events(attempts):
            if ev.slug:
                events.setdefault(ev.slug, []).append(
                    {"attempt": ev.attempt, "verdict": ev.verdict, "reason": ev.reason}
                )
        tried = {i.change_sha256 for i in self.book.values()}
        for a in attempts:
            tried.update(n.split(": ", 1)[1] for n in a.notes if n.startswith("answer change sha256: "))
        return {
            "protocol": 1,
            "answer": "a unified diff against kernel.cu on stdout, optionally preceded by Title:, Rationale: and "
            "Exact: yes|no lines; or JSON {title, rationale, exact, patch}; or nothing for no idea",
            "family": {
                "name": self.family.name,
                "description": self.family.description,
                "entry": self.family.entry,
                "knobs": [
                    {"name": k.name, "values": list(k.values), "default": k.default, "exact": k.exact, "doc": k.doc}
                    for k in self.family.knobs
                ],
            },
            "geometries": [{"name": g.name, "params": dict(g.params), "weight": g.weight} for g in self.geometries],
            "champion": {
                "id": champ.id,
                "genome": champ.genome,
                "ideas": idea_slugs(champ.genome),
                "score": champ.score,
                "speedup_vs_baseline": {g: iv.value for g, iv in champ.speedup_vs_baseline.items()},
            },
            "ideas": [
                {
                    "slug": s,
                    "title": i.title,
                    "rationale": i.rationale,
                    "exact": i.exact,
                    "origin": i.origin,
                    "change_sha256": i.change_sha256,
                    "patch": i.patch,
                    "tried": events.get(s, []),
                }
                for s, i in sorted(self.book.items())
            ],
            "tried_change_sha256": sorted(tried),
            "history": history,
            "kernel_cu": source,
            "resolved_cu": resolved,
        }

    def _fail(self, champ: Attempt, verdict: Verdict, origin: str, notes: list[str]) -> IdeaProposal:
        self.failures += 1
        o = self.outside
        if o is not None and self.failures >= o.max_failures:
            self.disabled = True
            self.out(f"outside proposer: {self.failures} failed answers in a row; not asked again this session")
        return IdeaProposal(Genome(champ.genome), origin, [champ.id], failure=verdict, notes=notes)

    def ask_outside(self, attempts: Sequence[Attempt], seen: set[str], champ: Attempt) -> IdeaProposal | None:
        o = self.outside
        name = command_name(o.command)
        origin = f"outside proposer ({name})"
        source = self.source_for(champ.genome)
        resolved = resolved_kernel(self.family, champ.genome, source)
        req = self.request(attempts, champ, source, resolved)
        try:
            ans = parse_answer(
                run_command(o.command, req, {"kernel.cu": source, "resolved.cu": resolved}, o.timeout_s, o.env)
            )
        except ProposerFailure as e:
            return self._fail(
                champ, Verdict.error("proposer", str(e), gate="proposer"), f"{origin}: no patch", [f"answer: {e}"]
            )
        if ans is None:
            self.out(f"{origin}: no idea this time; the knob proposer makes this attempt")
            return None
        title = " ".join(ans.title.split()) or f"untitled idea from {name}"
        rationale = " ".join(ans.rationale.split()) or "(the proposer gave no rationale)"
        who, origin = origin, f"{origin}: {title}"
        notes = [f"answer: {title}: {rationale}"]
        try:
            patch = normalize_patch(ans.patch)
        except IdeaError as e:
            return self._fail(
                champ,
                Verdict.error("proposer", f"the answer is not a usable patch: {e}", gate="proposer"),
                origin,
                notes,
            )
        notes.append(f"answer change sha256: {Idea('x', '', '', patch).change_sha256}")
        try:
            new_src = apply_patch(source, patch)
        except PatchError as e:
            return self._fail(
                champ,
                Verdict.error(
                    "idea", f"the proposed patch does not apply to the champion's kernel.cu: {e}", gate="idea"
                ),
                origin,
                notes,
            )
        if new_src == source:
            return self._fail(
                champ, Verdict.error("idea", "the proposed patch changes nothing", gate="idea"), origin, notes
            )
        try:
            idea, genome = self._rebase(champ, patch, new_src, title, rationale, ans.exact, who)
        except (IdeaError, PatchError) as e:
            return self._fail(
                champ, Verdict.error("idea", f"cannot make an idea of the patch: {e}", gate="idea"), origin, notes
            )
        same = next((i for i in self.book.values() if i.change_sha256 == idea.change_sha256), None)
        fresh = [idea]
        if same is not None:  # the same change under another name: use the registered idea
            genome = with_ideas(genome, [s for s in idea_slugs(genome) if s != idea.slug] + [same.slug])
            fresh = []
            notes.append(f"same change as idea {same.slug}")
        if genome.key in seen:
            return self._fail(
                champ,
                Verdict.error(
                    "proposer",
                    f"the answer repeats an idea already tried on this genome ({(same or idea).slug})",
                    gate="proposer",
                ),
                origin,
                notes,
            )
        self.failures = 0
        return IdeaProposal(genome, origin, [champ.id], new_ideas=fresh, notes=notes)

    def _rebase(
        self, champ: Attempt, patch: str, new_src: str, title: str, rationale: str, exact: bool, origin: str
    ) -> tuple[Idea, Genome]:
        """The answer as an idea against the baseline kernel.cu, and the genome that compiles exactly ``new_src``."""
        base = self.family.source()
        ctx = idea_slugs(champ.genome)
        knobs = knob_part(champ.genome)

        def make(p: str, why: str = "") -> Idea:
            sig = Idea("x", "", "", p).change_sha256
            slug = slugify(title, sig[:6])
            return Idea(slug, title, rationale + why, p, exact, origin)

        if ctx:
            try:
                idea = make(make_patch(base, apply_patch(base, patch)))
                genome = with_ideas(knobs, ctx + [idea.slug])
                if apply_ideas(base, genome, {**self.book, idea.slug: idea}) == new_src:
                    return idea, genome
            except (IdeaError, PatchError):
                pass
            idea = make(
                make_patch(base, new_src), f" (Made on top of ideas {', '.join(ctx)}, which this idea includes.)"
            )
            return idea, with_ideas(knobs, [idea.slug])
        idea = make(make_patch(base, new_src))
        return idea, with_ideas(knobs, [idea.slug])
