"""The chance that a genome can be measured at all, learned from the genomes tried so far (issue 42 item 5).

A Gaussian-process classifier (Laplace's approximation, Rasmussen & Williams algorithm 3.1) on the surrogate's
own encoding: the latent log-odds of failure is a constant plus one term per knob value, one per pair of knob
values, a trend along each numeric knob's ordered values and a trend along each pair of numeric knobs (the
product of their ranks). The pair terms are why it exists: a failure region that is an interaction of knobs
(block size x tile size too large: neither knob alone predicts failure) is what the per-knob, independent rates
the surrogate used before could not learn, and its proposals kept going there (29 of 60 attempts failed on a
development cache). The rank-pair term lets a few failures in a corner of two ordered knobs speak for the rest
of that corner before it is tried. The chance used is the one at the posterior mode of the log-odds.

The surrogate fits it before each proposal of a search that has seen a failure, with its ``fail_model`` option
(off by default: on the development caches it did not improve the search, docs/search-efficiency.md "Failure
model (session 29)"); it costs O(tried^3) to fit and O(tried) per candidate, vectorized, and draws nothing at
random (the same attempts give the same chances).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

# prior sizes of the latent log-odds terms (variances); chosen on the development caches only
# (docs/search-efficiency.md, "Failure model (session 29)")
W_BIAS = 1.0  # the constant: how often genomes fail at all
W_MAIN = 1.0  # one knob value
W_PAIR = 0.5  # one pair of knob values
W_TREND = 1.0  # along one numeric knob's ranks
W_RANK_PAIR = 1.0  # along the product of two numeric knobs' ranks
PRIOR_FAIL = 0.1  # the prior mean chance of failure (only its differences between genomes matter)
NEWTON_STEPS = 30
MAX_FAIL = 1 - 1e-6  # the chance is never taken as certain: a model can be wrong


Embed = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclasses.dataclass
class FailureModel:
    """Fitted failure chances. ``embed`` maps value-index rows to (one-hot knob values, ranks of numeric knobs),
    the surrogate's ``_embed``; ``fit`` is called with the tried genomes, then ``log_p_valid`` per candidate batch."""

    embed: Embed
    codes: np.ndarray | None = None
    grad: np.ndarray | None = None  # d log p(labels | f) / df at the posterior mode: the mean's weights

    def kernel(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Prior covariance of the failure log-odds between the genomes (value-index rows) of a and b."""
        (oa, ra), (ob, rb) = self.embed(a), self.embed(b)
        shared = oa @ ob.T
        dot = ra @ rb.T
        # sum over pairs i < j of the products: ((sum x)^2 - sum x^2) / 2
        pairs = 0.5 * (shared * shared - shared)
        rank_pairs = 0.5 * (dot * dot - (ra * ra) @ (rb * rb).T)
        return W_BIAS + W_MAIN * shared + W_PAIR * pairs + W_TREND * dot + W_RANK_PAIR * rank_pairs

    def fit(self, codes: np.ndarray, failed: np.ndarray) -> None:
        """Find the posterior mode of the log-odds at the tried genomes (Newton's method on the Laplace
        objective). ``codes``: one row per distinct tried genome; ``failed``: whether it failed (bool)."""
        y = failed.astype(float)
        K = self.kernel(codes, codes)
        m0 = math.log(PRIOR_FAIL / (1 - PRIOR_FAIL))
        a_cur = np.zeros(len(y))
        f = np.zeros(len(y))
        psi = _objective(a_cur, f, y, m0)
        for _ in range(NEWTON_STEPS):
            pi = _sigmoid(f + m0)
            w = pi * (1 - pi)
            sw = np.sqrt(w)
            L = np.linalg.cholesky(np.eye(len(y)) + sw[:, None] * K * sw[None, :])
            b = w * f + (y - pi)
            step = b - sw * np.linalg.solve(L.T, np.linalg.solve(L, sw * (K @ b))) - a_cur
            # a full Newton step can overshoot on separable labels (it oscillated to |f| ~ 100 on a development
            # cache): halve it until the objective rises
            for t in (1.0, 0.5, 0.25, 0.125, 0.0625):
                a_new = a_cur + t * step
                f_new = K @ a_new
                psi_new = _objective(a_new, f_new, y, m0)
                if psi_new >= psi:
                    break
            else:
                break
            done = psi_new - psi < 1e-9
            a_cur, f, psi = a_new, f_new, psi_new
            if done:
                break
        self.grad = y - _sigmoid(f + m0)
        self.codes = codes

    def log_p_valid(self, cand: np.ndarray, chunk: int = 4096) -> np.ndarray:
        """Log of the chance each candidate (value-index rows) can be measured: 1 - the failure chance at the
        posterior mode of the log-odds (the mode, not the predictive average: far from every tried genome the
        average tends to 1/2, which would charge exploration; the mode returns to the prior rate there)."""
        assert self.codes is not None and self.grad is not None
        m0 = math.log(PRIOR_FAIL / (1 - PRIOR_FAIL))
        out = [
            np.log1p(-np.minimum(_sigmoid(self.kernel(cand[lo : lo + chunk], self.codes) @ self.grad + m0), MAX_FAIL))
            for lo in range(0, len(cand), chunk)
        ]
        return np.concatenate(out) if out else np.zeros(0)


def _objective(a: np.ndarray, f: np.ndarray, y: np.ndarray, m0: float) -> float:
    """Laplace's objective: log p(labels | f) - f' K^-1 f / 2, with f = K a."""
    z = f + m0
    return float(y @ z - np.logaddexp(0.0, z).sum() - 0.5 * a @ f)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))
