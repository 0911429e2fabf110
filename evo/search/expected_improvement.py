"""The surrogate's acquisition (evo/search/surrogate.py): the log of expected improvement, stable far below the
incumbent, where the plain formula underflows to log(0) and every candidate would tie."""

from __future__ import annotations

import math

import numpy as np


def log_h(z: np.ndarray) -> np.ndarray:
    """log(z * Phi(z) + phi(z)): the log of expected improvement in units of sd, stable for very negative z."""
    out = np.empty_like(z)
    lo = z < -5.0
    zz = z[~lo]
    cdf = 0.5 * (1.0 + erf(zz / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * zz * zz) / math.sqrt(2 * math.pi)
    out[~lo] = np.log(np.maximum(zz * cdf + pdf, 1e-300))
    zl = z[lo]
    out[lo] = -0.5 * zl * zl - 0.5 * math.log(2 * math.pi) - 2 * np.log(-zl) + np.log1p(-3.0 / (zl * zl))
    return out


def erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz-Stegun 7.1.26 (absolute error < 1.5e-7), vectorized: numpy has no erf, scipy is not a dependency."""
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t
    return np.sign(x) * (1.0 - poly * np.exp(-a * a))
