"""Exploration across basins for the surrogate (issue 42 item 5): Thompson sampling (options ``thompson`` and
``thompson_stall``) and a restart away from the incumbent's basin (``restart``).

Thompson sampling: a draw of log speed over every candidate from the model's posterior, whose argmax is proposed
instead of expected improvement's.

The surrogate's Gaussian process is Bayesian linear regression written as a kernel (evo/search/surrogate.py): a
constant, one weight per knob value, one per value pair of two knobs, one trend per numeric knob. A draw of those
weights from the prior is cheap (a few thousand numbers at most), and Matheron's rule turns it into a posterior draw
with the model's own solve: f = f0 + k(cand, X) (K + noise I)^-1 (y - f0(X) - e), e the noise drawn, so a whole
space is scored by one coherent function, as BOCS does with the same model class. Unlike expected improvement, a
draw ranks a basin the model is unsure of above a refinement of the incumbent's whenever the draw says so, so runs
leave a basin that expected improvement keeps refining (pnpoly, mi50 on the development caches).

The restart: once ``restart`` attempts in a row have not improved on the best, the candidates are only those that
differ from the best genome in at least half of the knobs (:func:`far_from`), until one improves on it; expected
improvement (or a draw) chooses among them. ``neighbours`` is its local half: once that many attempts have not
improved, the best genome's untried one-knob neighbours come first (on convolution_W7800 the target is one knob off
the incumbent of attempt 38 and expected improvement reaches it at attempt 87). On the development caches every run
of convolution_mi50 settles in a basin at 0.95 of the best by its 8th attempt and spends the other 140 in it; the
best differs from it in 4 of 6 knobs.

Called by ``Surrogate.propose``: :func:`restart` on every model proposal, :func:`posterior_draw` on those that
:func:`use_draw` says are a draw's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from evo.core.records import Attempt


class Model(Protocol):
    """What a draw needs of the surrogate (evo/search/surrogate.py ``Surrogate``)."""

    active: list[int]
    levels: list[int]
    rank: dict[int, np.ndarray]
    noise2: float

    def _w(self) -> tuple[float, float, float, float]: ...

    def kernel(self, a: np.ndarray, b: np.ndarray) -> np.ndarray: ...


def prior_draw(model: Model, bias: float, rng: np.random.Generator) -> Any:
    """One draw of the weights from the prior (``bias``: the constant's variance): returns f0, a function of
    value-index rows (genomes) to log speed."""
    w_main, w_pair, w_trend, w_local = model._w()
    if w_local:
        raise ValueError("thompson: the high-order term (local) has no weights to draw; set local to 0")
    b = rng.normal(0.0, math.sqrt(bias))
    main = {i: rng.normal(0.0, math.sqrt(w_main), model.levels[i]) for i in model.active}
    pairs = {
        (i, j): rng.normal(0.0, math.sqrt(w_pair), (model.levels[i], model.levels[j]))
        for n, i in enumerate(model.active)
        for j in model.active[n + 1 :]
    }
    trend = {i: rng.normal(0.0, math.sqrt(w_trend)) for i in model.rank}

    def f0(a: np.ndarray) -> np.ndarray:
        out = np.full(len(a), b)
        for i, u in main.items():
            out += u[a[:, i]]
        for (i, j), p in pairs.items():
            out += p[a[:, i], a[:, j]]
        for i, t in trend.items():
            out += t * model.rank[i][a[:, i]]
        return out

    return f0


def posterior_draw(
    model: Model,
    codes: np.ndarray,
    y: np.ndarray,
    cand: np.ndarray,
    bias: float,
    rng: np.random.Generator,
    chunk: int = 4096,
) -> np.ndarray:
    """One draw of log speed at the candidates from the posterior given the measured genomes (Matheron's rule)."""
    f0 = prior_draw(model, bias, rng)
    K = model.kernel(codes, codes) + model.noise2 * np.eye(len(y))
    eps = rng.normal(0.0, math.sqrt(model.noise2), len(y))
    v = np.linalg.solve(K, y - f0(codes) - eps)
    out = [
        f0(cand[lo : lo + chunk]) + model.kernel(cand[lo : lo + chunk], codes) @ v for lo in range(0, len(cand), chunk)
    ]
    return np.concatenate(out) if out else np.zeros(0)


def since_best(attempts: Sequence[Attempt]) -> int:
    """Attempts (measured or failed; interrupted ones not) since the best score so far was first reached."""
    best, n = -math.inf, 0
    for a in attempts:
        if a.verdict.kind == "interrupted":
            continue
        n += 1
        if a.score is not None and math.isfinite(a.score) and a.score > best:
            best, n = a.score, 0
    return n


def use_draw(every: int, stall: int, attempts: Sequence[Attempt]) -> bool:
    """Whether this proposal is a posterior draw's: every ``every``-th attempt (0: never), or once ``stall`` attempts
    in a row have not improved on the best (0: never), until one does. Both read the attempts alone, so a proposal
    made ahead of its predecessor's result (compile-ahead) is decided the same way on every run."""
    done = sum(a.verdict.kind != "interrupted" for a in attempts)
    if every and done % every == every - 1:
        return True
    return bool(stall) and since_best(attempts) >= stall


def far_from(cand: np.ndarray, centre: np.ndarray, active: Sequence[int]) -> np.ndarray:
    """Which candidates (value-index rows) differ from ``centre`` in at least half of the ``active`` knobs."""
    cols = list(active)
    return (cand[:, cols] != centre[cols]).sum(axis=1) >= max(1, math.ceil(len(cols) / 2))


def restart(
    cand: np.ndarray,
    bonus: np.ndarray,
    best: np.ndarray,
    active: Sequence[int],
    stalls: tuple[int, int],
    attempts: Sequence[Attempt],
) -> tuple[np.ndarray, np.ndarray, str]:
    """The candidates (and their log chance to be measured) a proposal chooses among, and why (for its origin).
    ``stalls`` = (neighbours, restart), each 0 (off) or a number of attempts since the best improved: from the first
    on, the best genome's untried one-knob neighbours while any is left; from the second on, the genomes far from it
    (:func:`far_from`); otherwise (or when none is left) every candidate."""
    n = since_best(attempts)
    near_after, far_after = stalls
    if near_after and n >= near_after:
        near = (cand != best).sum(axis=1) == 1
        if near.any():
            return cand[near], bonus[near], f"{n} attempts without a gain, a one-knob neighbour of the best; "
    if far_after and n >= far_after:
        far = far_from(cand, best, active)
        if far.any():
            return cand[far], bonus[far], f"{n} attempts without a gain, restart far from the best; "
    return cand, bonus, ""
