"""Surrogate-guided search: a model of log speed over the knobs screens the whole space before any GPU time.

Options: ``Surrogate.OPTIONS`` (listed in docs/config.md).

The model is a Gaussian process on log(score) whose kernel is the sum of a
constant, one term per knob (do two genomes share its value: a one-knob
effect), one term per pair of knobs (a two-knob interaction) and, for numeric
knobs with three or more values, a linear trend along their ordered values
(and, with ``local``, a high-order term: the likeness of two genomes, halving
per knob they differ in, which no sum of one- and two-knob terms expresses). It
is Bayesian linear regression on one-hot knob values and value pairs, written
as a kernel, so it costs O(measured^3) and never the size of the space. Every
valid, untried genome of the space (every one ``family.check`` accepts, up to
200,000 before the check; beyond that ``pool`` mutations and crossovers of the
best genomes plus random ones) is scored by its expected improvement over the
best measured score times the chance it can be measured at all, and the best
is proposed; ties go by the seed. From the 30th attempt every third proposal is Optuna TPE's instead
(``portfolio``, the default since session 32: evo/search/portfolio.py).

Before each proposal the prior sizes are fitted to the attempts (``fit``): the
one-knob effect size and the pairwise share are set to the point of a small
grid (FIT_EFFECT x FIT_PAIR) where the measured log speeds are most likely
(type-II maximum likelihood), so a family whose knobs move speed 5x gets a wide
prior and one whose knobs move it 2% a narrow one, without anyone choosing
``effect`` for it (``fit_ordinal``: the trend's size too; ``local``: the
high-order term's, among none, half and the configured size). Two sizes by
default: fitting one importance per knob the same way
made the model over-confident on few measurements and cost evaluations on the
recorded sweep and on synthetic landscapes (docs/search-efficiency.md). With
``fit`` off, ``effect`` and ``pairwise`` hold. One overall scale can be
fitted too (``calibrate``): y'K^-1 y / n, the maximum-likelihood factor of the
whole covariance, multiplies every posterior variance when it exceeds 1. On
mhc_prenorm_gemm, whose best genomes sit on a sharp interaction of four knobs,
the fixed prior predicted the best genome at 32x +/- 4% (it measures 46.7x) and
the search needed 445 evaluations for it on half the tuning seeds; calibrated,
44-54 (docs/search-efficiency.md). It is off by default: the first leave-one-family-out selection of
tools/select_surrogate.py (on all four recorded sweeps, target within 2%) preferred it off; the second grid
(with ``fit``) leaves it out.

Only what is known before a GPU evaluation screens candidates: ``family.check``,
the campaign's tabu, the family's ``inexact_knobs`` (once an attempt was
rejected for changing the summation order the campaign runs in exact mode and
rejects every such genome before the GPU, so none is proposed; until an attempt
shows the mode, such a genome counts as measurable 1 time in 5), the failures
so far (a knob value that keeps failing lowers the chance; with ``fail_model``, a classifier on knob values and
pairs of them, evo/search/failure_model.py, which can learn a failure region made of two knobs together; with
``fail_impute`` the speed model also counts each failed genome at the worst measured speed), and, where a caller
sets ``static_key`` (the variant's identity: the SASS hash from compiling on the
CPU with the launch digest, evo/core/variant.py ``variant_key``; the machine code
alone would hide every genome that differs only in its launch), genomes of a
variant already measured: those are never proposed.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from evo.core.genome import Genome
from evo.core.hooks import check_genome
from evo.core.records import Attempt, Code
from evo.search import adaptive_screen, explore, portfolio
from evo.search.base import Option, Proposal, Proposer
from evo.search.expected_improvement import log_h as _log_h
from evo.search.failure_model import FailureModel

ENUMERATE_MAX = 200_000  # score the whole space up to this many genomes (before family.check)
MAX_OBS = 256  # measured genomes the model conditions on, at most (the best half and a seeded sample of the rest)
INEXACT_PRIOR = 0.2  # chance a genome with an inexact knob can be measured, while the correctness mode is unknown
BIAS = 0.5**2  # prior variance of the constant
LOCAL_DECAY = 0.5  # the high-order term's likeness of two genomes, per knob they differ in


def _h(v: Any) -> Any:
    """A hashable stand-in for a knob value that keeps True apart from 1 (and False from 0)."""
    return (type(v) is bool, v)


class Surrogate(Proposer):
    OPTIONS = {
        "effect": Option(
            0.15,
            "prior size of a one-knob effect on log speed (0.15: a knob value moves speed by ~15%); with `fit`, "
            "only until three genomes are measured",
            0.01,
            2.0,
        ),
        "pairwise": Option(
            0.5, "prior size of a two-knob interaction, relative to `effect` (with `fit`: as it chooses)", 0.0, 4.0
        ),
        # fit on since issue 32's second selection, ordinal 2.0 since its third (tools/select_surrogate.py, on all
        # four sweeps; docs/search-efficiency.md)
        "ordinal": Option(
            2.0, "prior size of a trend along a numeric knob's ordered values, relative to `effect` (0: none)", 0.0, 4.0
        ),
        "noise": Option(0.02, "measurement noise plus what the model cannot express, in log speed", 0.001, 1.0),
        "init": Option(0, "genomes of a space-filling start design (most knobs changed) before the model leads", 0, 64),
        "pool": Option(4096, "candidates scored per proposal when the space is too big to score whole", 64, 65536),
        # false since issue 32: tools/select_surrogate.py's leave-one-family-out selection chose it on all four
        # recorded sweeps (docs/search-efficiency.md); true was chosen on the test sweeps' tuning seeds
        "calibrate": Option(False, "scale the posterior variance up when the scores vary more than the prior allows"),
        "sample": Option(
            0.0,
            "seeded sampling among near-ties: the proposal is drawn with probability proportional to "
            "exp(acquisition / sample), the acquisition being log expected improvement (0: always the best)",
            0.0,
            4.0,
        ),
        "fit": Option(
            True,
            "choose the prior sizes (effect, pairwise) anew before each proposal by the attempts' marginal "
            "likelihood over a small grid, instead of keeping the configured ones",
        ),
        "fit_ordinal": Option(
            False, "with fit: choose the trend's size (`ordinal`) the same way, among 0.5, 1 and 2 x effect"
        ),
        "fit_draw": Option(
            False,
            "with fit: draw the prior sizes from their posterior over the grid (seeded) instead of taking the most "
            "likely, so that each seed makes its own run",
        ),
        "local": Option(
            0.0,
            "prior size of a high-order term, relative to the knobs' whole one-knob part: genomes alike in every "
            "knob are alike in speed, the likeness halving per knob changed (0: none; with `fit`, the largest it "
            "may choose: it also tries half and none)",
            0.0,
            4.0,
        ),
        # both off: on the development caches neither improved ERT (docs/search-efficiency.md, "Failure model
        # (session 29)"); they stay for spaces whose failures crowd the proposals
        "fail_model": Option(
            False,
            "learn the chance a genome can be measured from the failed and measured genomes together, knob pairs "
            "included (evo/search/failure_model.py); false: one failure rate per knob value, independent",
        ),
        "fail_impute": Option(
            False,
            "the speed model counts each failed genome as measured at the worst speed measured so far, so that "
            "it stops predicting gains (and uncertainty) in a region that only fails",
        ),
        # all four off: on the development caches none shortened the search (docs/search-efficiency.md, "Exploration
        # (session 29)")
        "thompson": Option(
            0,
            "every this many attempts, propose the best genome of a posterior draw of the model (Thompson "
            "sampling, evo/search/explore.py) instead of the best expected improvement (0: never)",
            0,
            64,
        ),
        "thompson_stall": Option(
            0,
            "once this many attempts in a row have not improved on the best, propose posterior draws' best genomes "
            "until one does (0: never)",
            0,
            256,
        ),
        "neighbours": Option(
            0,
            "once this many attempts in a row have not improved on the best, propose the best genome's untried "
            "one-knob neighbours (best expected improvement first) before anything else (0: never)",
            0,
            256,
        ),
        "restart": Option(
            0,
            "once this many attempts in a row have not improved on the best, propose only genomes that differ from "
            "the best in at least half of the knobs, until one improves on it (0: never)",
            0,
            256,
        ),
        **adaptive_screen.OPTIONS,  # screen, screen_values, screen_every
        **portfolio.OPTIONS,  # portfolio, portfolio_start
    }

    @classmethod
    def validate_options(cls, options: Mapping[str, Any]) -> None:
        """The table's checks, and the combinations that would not do what they say."""
        super().validate_options(options)

        def given(name: str) -> Any:
            return options.get(name, cls.OPTIONS[name].default)

        for name in ("fit_ordinal", "fit_draw"):
            if given(name) and not given("fit"):
                raise ValueError(f"{name}: works only with fit: true (fit is false here)")
        if (given("thompson") or given("thompson_stall")) and given("local"):
            raise ValueError("thompson: the high-order term (local) has no weights to draw; set local to 0")
        if given("fit_ordinal") and given("ordinal") == 0:
            raise ValueError("fit_ordinal: ordinal is 0 (no trend), and fit_ordinal would choose one anyway")
        adaptive_screen.validate(given)
        portfolio.validate(given, options)

    def __init__(self, family, geometries, options, seed, tabu=None):
        super().__init__(family, geometries, options, seed, tabu)
        self.np_rng = np.random.default_rng(self.rng.getrandbits(64))
        self.knobs = list(self.family.knobs)
        self.names = [k.name for k in self.knobs]
        self.levels = [len(k.values) for k in self.knobs]
        self.index = [{_h(v): i for i, v in enumerate(k.values)} for k in self.knobs]
        self.active = [i for i, n in enumerate(self.levels) if n > 1]  # a knob with one value tells nothing
        self.rank: dict[int, np.ndarray] = {}  # numeric knobs with 3+ values: each value's centred rank in [-1, 1]
        for i in self.active:
            vals = self.knobs[i].values
            if self.levels[i] >= 3 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
                r = np.argsort(np.argsort(np.array(vals, dtype=float))).astype(float)
                r -= r.mean()
                self.rank[i] = r / np.abs(r).max()
        e2 = float(self.opt("effect")) ** 2
        self.w_main = e2
        self.w_pair = e2 * float(self.opt("pairwise")) ** 2
        self.w_trend = e2 * float(self.opt("ordinal")) ** 2
        self.w_local = e2 * len(self.active) * float(self.opt("local")) ** 2
        self.noise2 = float(self.opt("noise")) ** 2
        # static_key(genome) -> the variant (machine code and launch, evo/core/variant.py), or None; set by a caller
        # that can compile
        self.static_key: Callable[[Genome], str | None] | None = None
        self._static: dict[str, str | None] = {}
        self._space: np.ndarray | None = None  # codes of every genome family.check accepts, when enumerated
        self._key_index: dict[str, int] = {}
        self._inexact: np.ndarray | None = None
        self._inexact_of: dict[str, bool] = {}  # genome key -> has a knob that may change output bits
        # the model-free half of a portfolio (its seed drawn only when on: `portfolio: 0` keeps the runs before it)
        self._portfolio = portfolio.Portfolio(self, self.rng.getrandbits(31)) if portfolio.every(self.opt) else None

    # --- encoding -----------------------------------------------------------
    def code(self, genome: Mapping[str, Any]) -> tuple[int, ...] | None:
        """Value indexes of a genome's knobs, or None when it has a knob or value this family does not."""
        try:
            return tuple(self.index[i][_h(genome[n])] for i, n in enumerate(self.names))
        except (KeyError, TypeError):
            return None

    def genome_of(self, code: Sequence[int]) -> Genome:
        return Genome({n: self.knobs[i].values[int(c)] for i, (n, c) in enumerate(zip(self.names, code))})

    def _enumerate(self) -> None:
        if self._space is not None:
            return
        if math.prod(self.levels) > ENUMERATE_MAX:
            self._space = np.zeros((0, len(self.knobs)), dtype=np.int64)
            return
        codes, keys = [], []
        for vals in itertools.product(*(range(n) for n in self.levels)):
            g = self.genome_of(vals)
            if check_genome(self.family, g, self.geometries) is None:
                codes.append(vals)
                keys.append(g.key)
        self._space = np.array(codes, dtype=np.int64).reshape(len(codes), len(self.knobs))
        self._key_index = {k: i for i, k in enumerate(keys)}

    def _is_inexact(self, g: Mapping[str, Any]) -> bool:
        key = Genome(g).key
        if key not in self._inexact_of:
            self._inexact_of[key] = any(self.family.inexact_knobs(g, geo) for geo in self.geometries)
        return self._inexact_of[key]

    def _inexact_mask(self) -> np.ndarray:
        if self._inexact is None:
            assert self._space is not None
            self._inexact = np.array([self._is_inexact(self.genome_of(c)) for c in self._space], dtype=bool)
        return self._inexact

    # --- the model ------------------------------------------------------------
    def _embed(self, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One-hot knob values, and the ranks of numeric knobs, of the genomes (value-index rows) of a."""
        onehot = (
            np.concatenate([np.eye(self.levels[i])[a[:, i]] for i in self.active], axis=1)
            if self.active
            else np.zeros((len(a), 0))
        )
        ranks = np.stack([r[a[:, i]] for i, r in self.rank.items()], axis=1) if self.rank else np.zeros((len(a), 0))
        return onehot, ranks

    def kernel(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Prior covariance of log speed between the genomes (value-index rows) of a and b."""
        return self._combine(*self._parts(a, b), self._w())

    def _w(self) -> tuple[float, float, float, float]:
        return (self.w_main, self.w_pair, self.w_trend, self.w_local)

    def _parts(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """How many knobs each two genomes share, the products of their numeric knobs' ranks, and the high-order
        likeness (LOCAL_DECAY per knob they differ in)."""
        (oa, ra), (ob, rb) = self._embed(a), self._embed(b)
        shared = oa @ ob.T
        return shared, ra @ rb.T, LOCAL_DECAY ** (len(self.active) - shared)

    @staticmethod
    def _combine(
        shared: np.ndarray, trend: np.ndarray, local: np.ndarray, w: tuple[float, float, float, float]
    ) -> np.ndarray:
        # the pair terms: sum over knob pairs of "both shared" = (m^2 - m) / 2 for m shared knobs
        out = BIAS + w[0] * shared + w[1] * 0.5 * (shared * shared - shared) + w[2] * trend
        return out + w[3] * local if w[3] else out

    # the prior sizes `fit` chooses among: effect, and pairwise relative to it (ordinal keeps its ratio)
    FIT_EFFECT = (0.05, 0.1, 0.15, 0.25, 0.4, 0.7, 1.0)
    FIT_PAIR = (0.25, 0.5, 1.0)
    FIT_ORDINAL = (0.5, 1.0, 2.0)  # with fit_ordinal: the trend's size relative to effect

    def _fit(self, codes: np.ndarray, y: np.ndarray) -> None:
        """Set the prior sizes to the grid point whose marginal likelihood of the measured log speeds is highest
        (``fit_draw``: one drawn with probability proportional to it)."""
        shared, trend, local = self._parts(codes, codes)
        ords = self.FIT_ORDINAL if self.opt("fit_ordinal") and self.rank else (float(self.opt("ordinal")),)
        top = float(self.opt("local"))
        sizes = sorted({0.0, 0.5 * top, top})
        lls, ws = [], []
        for e, p, o, h in itertools.product(self.FIT_EFFECT, self.FIT_PAIR, ords, sizes):
            w = (e * e, e * e * p * p, e * e * o * o, e * e * len(self.active) * h * h)
            try:
                L = np.linalg.cholesky(self._combine(shared, trend, local, w) + self.noise2 * np.eye(len(y)))
            except np.linalg.LinAlgError:
                continue
            z = np.linalg.solve(L, y)
            lls.append(-0.5 * float(z @ z) - float(np.log(np.diag(L)).sum()))
            ws.append(w)
        if not lls:
            return
        ll = np.array(lls)
        if self.opt("fit_draw"):
            prob = np.exp(ll - ll.max())
            pick = int(self.np_rng.choice(len(prob), p=prob / prob.sum()))
        else:
            pick = int(np.argmax(ll))
        self.w_main, self.w_pair, self.w_trend, self.w_local = ws[pick]

    def prior_var(self, a: np.ndarray) -> np.ndarray:
        """Prior variance of log speed at each genome of a (the kernel's diagonal)."""
        d = len(self.active)
        out = np.full(len(a), BIAS + self.w_main * d + self.w_pair * 0.5 * d * (d - 1) + self.w_local)
        for i, r in self.rank.items():
            out += self.w_trend * r[a[:, i]] ** 2
        return out

    def predict(
        self, codes: np.ndarray, y: np.ndarray, cand: np.ndarray, chunk: int = 4096
    ) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and variance of log speed (without the noise) at the candidate genomes."""
        Linv = np.linalg.inv(np.linalg.cholesky(self.kernel(codes, codes) + self.noise2 * np.eye(len(y))))
        alpha = Linv.T @ (Linv @ y)
        # the prior's overall size, fitted (maximum likelihood of one scale of the whole covariance), never below
        # 1: scores that vary more than the prior allows widen every posterior variance instead of leaving the
        # model sure of predictions it has no grounds for
        scale = max(1.0, float(y @ alpha) / len(y)) if self.opt("calibrate") else 1.0
        means, variances = [], []
        for lo in range(0, len(cand), chunk):
            c = cand[lo : lo + chunk]
            kx = self.kernel(c, codes)
            w = kx @ Linv.T
            means.append(kx @ alpha)
            variances.append(scale * (self.prior_var(c) - (w * w).sum(axis=1)))
        return np.concatenate(means), np.maximum(np.concatenate(variances), 1e-12)

    # --- what the attempts say --------------------------------------------------
    def _static_of(self, g: Genome) -> str | None:
        if self.static_key is None:
            return None
        if g.key not in self._static:
            try:
                self._static[g.key] = self.static_key(g)
            except Exception:  # noqa: BLE001 - a genome that does not build has no digest
                self._static[g.key] = None
        return self._static[g.key]

    def _data(self, attempts: Sequence[Attempt]):
        """Measured log scores per genome, failed genomes, every tried genome, and the correctness mode shown."""
        scores: dict[tuple[int, ...], list[float]] = {}
        fails: list[tuple[int, ...]] = []
        tried: list[tuple[int, ...]] = []
        exact = tolerance = False
        for a in attempts:
            if a.verdict.kind == "interrupted":
                continue
            c = self.code(a.genome)
            if c is None:
                continue
            tried.append(c)
            if a.score is not None and math.isfinite(a.score) and a.score > 0:
                scores.setdefault(c, []).append(math.log(a.score))
                tolerance = tolerance or self._is_inexact(self.genome_of(c))  # an inexact genome was measured
            elif a.verdict.code is Code.CORRECTNESS_INEXACT_KNOB:  # the campaign shows it runs in exact mode
                exact = True
            elif a.verdict.code is not Code.STATIC_IDENTICAL_SASS:  # machine code measured before: no failure
                fails.append(c)
        mode = "tolerance" if tolerance else "exact" if exact else None
        return scores, fails, tried, mode

    def _log_p_valid(self, codes: np.ndarray, fails, tried, mode: str | None, inexact: np.ndarray) -> np.ndarray:
        """Log of the chance that a candidate can be measured at all."""
        out = np.zeros(len(codes))
        if mode is None:
            out[inexact] += math.log(INEXACT_PRIOR)
        if fails and self.opt("fail_model"):
            out += self._genome_failures(fails, tried).log_p_valid(codes)
        elif fails:
            F, T = np.array(fails, dtype=np.int64), np.array(tried, dtype=np.int64)
            for i in self.active:
                nf = np.bincount(F[:, i], minlength=self.levels[i]).astype(float)
                nt = np.bincount(T[:, i], minlength=self.levels[i]).astype(float)
                rate = np.minimum((nf + 0.1) / (nt + 1.0), 0.95)  # a value that never failed: 0.1 / (tries + 1)
                out += np.log1p(-rate)[codes[:, i]]
        return out

    def _observations(self, scores, fails) -> tuple[np.ndarray, np.ndarray]:
        """What the speed model conditions on: each measured genome's mean log score (``fail_impute``: the failed
        ones too), at most MAX_OBS of them."""
        codes = np.array(list(scores), dtype=np.int64)
        y = np.array([float(np.mean(v)) for v in scores.values()])
        if self.opt("fail_impute") and fails:
            codes, y = self._with_failures(codes, y, fails)
        if len(y) > MAX_OBS:  # the model costs n^3: the best half and a seeded sample of the rest
            by_score = np.argsort(-y, kind="stable")
            rest = self.np_rng.choice(by_score[MAX_OBS // 2 :], MAX_OBS - MAX_OBS // 2, replace=False)
            keep = np.concatenate([by_score[: MAX_OBS // 2], np.sort(rest)])
            codes, y = codes[keep], y[keep]
        return codes, y

    def _with_failures(self, codes: np.ndarray, y: np.ndarray, fails) -> tuple[np.ndarray, np.ndarray]:
        """``fail_impute``: the measured genomes plus the failed ones (never measured), each at the worst measured
        log speed, so that a failure leaves no hole of high uncertainty (and extrapolated speed) that expected
        improvement is drawn into."""
        extra = sorted(set(fails) - {tuple(int(x) for x in c) for c in codes})
        if not extra:
            return codes, y
        worst = np.full(len(extra), float(y.min()))
        return np.concatenate([codes, np.array(extra, dtype=np.int64)]), np.concatenate([y, worst])

    def _genome_failures(self, fails, tried) -> FailureModel:
        """The genome-level failure model fitted to the distinct tried genomes (failed: every try failed)."""
        nf, nt = Counter(fails), Counter(tried)
        codes = sorted(nt)
        model = FailureModel(self._embed)
        model.fit(np.array(codes, dtype=np.int64), np.array([nf[c] == nt[c] for c in codes], dtype=bool))
        return model

    # --- proposing --------------------------------------------------------------
    def propose(self, attempts: Sequence[Attempt], seen: set[str]) -> Proposal | None:
        turn = portfolio.turn(self, self._portfolio, attempts, seen) if self._portfolio is not None else None
        return turn or self._model_proposal(attempts, seen)

    def _model_proposal(self, attempts: Sequence[Attempt], seen: set[str]) -> Proposal | None:
        """The model's proposal: expected improvement (or a screen's, a draw's, a space-filling start's)."""
        self._enumerate()
        assert self._space is not None
        scores, fails, tried, mode = self._data(attempts)
        mode = self.correctness_mode or mode  # what the config says beats what the verdicts have shown so far
        if len(self._space):
            mask = np.ones(len(self._space), dtype=bool)
            for k in seen:
                i = self._key_index.get(k)
                if i is not None:
                    mask[i] = False
            for i, n in enumerate(self.names):
                bad = [self.index[i][_h(v)] for v in self.tabu.get(n, ()) if _h(v) in self.index[i]]
                if bad:
                    mask &= ~np.isin(self._space[:, i], bad)
            inexact = self._inexact_mask()
            if mode == "exact":
                mask &= ~inexact
            cand, inexact = self._space[mask], inexact[mask]
        else:
            cand = self._pool(scores, seen, mode)
            inexact = np.array([self._is_inexact(self.genome_of(c)) for c in cand], dtype=bool)
        if len(cand) == 0:
            return None
        screening = False
        if self.opt("screen") and scores:
            near = self._screen(cand, seen, mode, tried, attempts)
            if len(near):
                cand, screening = near, True
                inexact = np.array([self._is_inexact(self.genome_of(c)) for c in cand], dtype=bool)
        known: set[str] = set()  # machine code already measured: nothing to learn from it
        if self.static_key is not None:
            known = {d for d in (self._static_of(self.genome_of(c)) for c in scores) if d is not None}
        bonus = self._log_p_valid(cand, fails, tried, mode, inexact)
        bonus += 1e-9 * self.np_rng.random(len(cand))  # ties go by the seed, not by the order of the space
        if not scores or len(tried) <= int(self.opt("init")):
            order = self._space_filling(cand, tried, bonus)
            return self._first_new(order, cand, known, attempts, lambda j: "surrogate: space-filling start")
        codes, y = self._observations(scores, fails)
        if self.opt("fit") and len(y) >= 3:
            self._fit(codes, y)
        cand, bonus, why = explore.restart(cand, bonus, codes[np.argmax(y)], self.active, self._stalls(), attempts)
        if explore.use_draw(int(self.opt("thompson")), int(self.opt("thompson_stall")), attempts):
            return self._drawn(codes, y, cand, bonus, known, attempts, why)
        mean, var = self.predict(codes, y, cand)
        sd = np.sqrt(var)
        acq = np.log(sd) + _log_h((mean - float(y.max())) / sd) + bonus
        temp = float(self.opt("sample"))
        if temp > 0:  # Gumbel-max: the best of acq + temp * Gumbel noise is a draw from softmax(acq / temp)
            acq = acq - temp * np.log(-np.log(self.np_rng.uniform(1e-300, 1.0, len(acq))))
        order = np.argsort(-acq, kind="stable")
        return self._first_new(
            order,
            cand,
            known,
            attempts,
            lambda j: (
                ("surrogate screen (one knob off the baseline): " if screening else "surrogate: ")
                + f"{why}expected improvement, predicted {math.exp(mean[j]):.3f}x "
                f"(+/- {100 * (math.exp(sd[j]) - 1):.0f}%)"
            ),
        )

    def _stalls(self) -> tuple[int, int]:
        return int(self.opt("neighbours")), int(self.opt("restart"))

    def _drawn(self, codes, y, cand: np.ndarray, bonus: np.ndarray, known: set[str], attempts, why: str) -> Proposal:
        """The candidate best in one posterior draw (times its chance to be measured): ``thompson``'s proposals."""
        draw = explore.posterior_draw(self, codes, y, cand, BIAS, self.np_rng)
        order = np.argsort(-(draw + bonus), kind="stable")
        what = lambda j: f"surrogate: {why}posterior draw (Thompson), drawn {math.exp(draw[j]):.3f}x"  # noqa: E731
        return self._first_new(order, cand, known, attempts, what)

    def _screen(self, cand: np.ndarray, seen: set[str], mode: str | None, tried, attempts) -> np.ndarray:
        """The screen's candidates for this proposal (evo/search/adaptive_screen.py): the baseline's untried one-knob
        changes, bounded by ``screen_values`` and ``screen_every``."""
        values, every = int(self.opt("screen_values")), int(self.opt("screen_every"))
        return adaptive_screen.candidates(self, cand, seen, mode, tried, attempts, values, every)

    def _first_new(self, order: np.ndarray, cand: np.ndarray, known: set[str], attempts, what) -> Proposal:
        """The best-ranked candidate whose machine code (when known) was not measured yet (else the best-ranked)."""
        pick = int(order[0])
        if known:
            for j in order:
                if self._static_of(self.genome_of(cand[j])) not in known:
                    pick = int(j)
                    break
        return self._named(self.genome_of(cand[pick]), attempts, what(pick))

    def _space_filling(self, cand: np.ndarray, tried, bonus: np.ndarray) -> np.ndarray:
        """Candidates by the number of knobs changed from their nearest tried genome, most first."""
        dist = np.zeros(len(cand))
        if tried:
            T = np.array(tried, dtype=np.int64)
            dist = np.min((cand[:, None, :] != T[None, :, :]).sum(axis=2), axis=1).astype(float)
        return np.argsort(-(dist + bonus + 1e-3 * self.np_rng.random(len(cand))), kind="stable")

    def _pool(self, scores, seen: set[str], mode: str | None) -> np.ndarray:
        """Spaces too big to score whole: mutations and crossovers of the best genomes, plus random ones."""
        size = int(self.opt("pool"))
        base = self.code(self.family.baseline())
        parents = [c for c, _ in sorted(scores.items(), key=lambda kv: -max(kv[1]))[:8]] or (
            [base] if base is not None else []
        )
        out: dict[str, tuple[int, ...]] = {}
        for _ in range(size * 4):
            if len(out) >= size:
                break
            r = self.rng.random()
            if r < 0.2 or not parents:
                c = tuple(self.rng.randrange(n) for n in self.levels)
            elif r < 0.4 and len(parents) > 1:
                a, b = self.rng.sample(parents, 2)
                c = tuple(x if self.rng.random() < 0.5 else z for x, z in zip(a, b))
            else:
                lst = list(self.rng.choice(parents))
                for i in self.rng.sample(self.active, min(len(self.active), 1 + int(self.rng.random() < 0.5))):
                    lst[i] = self.rng.choice([v for v in range(self.levels[i]) if v != lst[i]])
                c = tuple(lst)
            g = self.genome_of(c)
            if g.key in out or not self.valid(g, seen) or (mode == "exact" and self._is_inexact(g)):
                continue
            out[g.key] = c
        return np.array(list(out.values()), dtype=np.int64).reshape(len(out), len(self.knobs))

    @staticmethod
    def _named(g: Genome, attempts: Sequence[Attempt], what: str) -> Proposal:
        """The proposal, naming the nearest measured genome (the best of the nearest) as what it derives from."""
        near: Attempt | None = None
        nd: int | None = None
        for a in attempts:
            if a.score is None:
                continue
            d = len(g.diff(a.genome))
            if near is None or nd is None or d < nd or (d == nd and a.score > (near.score or 0.0)):
                near, nd = a, d
        if near is None:
            return Proposal(g, what)
        return Proposal(g, f"{what}; from #{near.id}: {g.describe_change(Genome(near.genome))}", [near.id])
