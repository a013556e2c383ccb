"""The numbers behind ``costgraph calibrate`` (:mod:`costgraph.training.calibration`): one factor
solved exactly, several fitted by bounded least squares. NumPy only (no SciPy: the project's core
dependencies are SymPy, networkx, lark, NumPy, rich and humanize).

* :func:`solve_increasing`: the ``k`` in ``[lo, hi]`` with ``f(k) = target`` for ``f`` exact,
  non-decreasing and piecewise linear in ``k`` (a step time as a function of one multiplier: sums
  and maxima of linear terms), found by bisection on dyadic rationals and a secant step on the
  bracket: once the bracket lies on one linear piece the secant is exact, so the answer is a
  rational ``k`` with ``f(k) = target`` exactly.
* :func:`bounded_least_squares`: ``argmin Σ r_i(x)²`` over a box ``lower ≤ x ≤ upper``, by a
  projected Levenberg–Marquardt iteration (Moré 1978, "The Levenberg-Marquardt algorithm:
  implementation and theory", with the step projected onto the box and the variables held at a
  bound whose gradient points outward left out of the step, as in the active-set form of
  Kanzow, Yamashita and Fukushima 2004, "Levenberg–Marquardt methods with strong local convergence
  properties for solving nonlinear equations with convex constraints"); the Jacobian by central
  differences.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import sympy


def solve_increasing(f: Callable, target, lo, hi, rounds: int = 400):
    """The rational ``k`` in ``[lo, hi]`` with ``f(k) == target`` exactly (module docstring), or
    None when ``f(lo) > target`` or ``f(hi) < target`` (no such ``k`` in the interval). ``f`` takes
    and returns SymPy rationals; ``lo``, ``hi``, ``target`` are rationals."""
    lo, hi, target = sympy.Rational(lo), sympy.Rational(hi), sympy.Rational(target)
    f_lo, f_hi = f(lo), f(hi)
    if f_lo > target or f_hi < target:
        return None
    for _ in range(rounds):
        if f_lo == target:
            return lo
        if f_hi == target:
            return hi
        if f_hi != f_lo:   # the secant on the bracket: exact once the bracket is one linear piece
            k = lo + (target - f_lo) * (hi - lo) / (f_hi - f_lo)
            if f(k) == target:
                return k
        mid = (lo + hi) / 2
        f_mid = f(mid)
        if f_mid < target:
            lo, f_lo = mid, f_mid
        else:
            hi, f_hi = mid, f_mid
    return (lo + hi) / 2   # not reached for a piecewise-linear f with finitely many pieces


def bounded_least_squares(residuals: Callable, x0, lower, upper, *, iterations: int = 200,
                          tolerance: float = 1e-15) -> np.ndarray:
    """``x`` in the box ``[lower, upper]`` (arrays) minimizing ``Σ residuals(x)²`` (module
    docstring), from ``x0`` (projected onto the box first). ``residuals`` maps a float array to a
    float array. Stops when a step no longer lowers the sum by more than ``tolerance`` (relative)."""
    lower, upper = np.asarray(lower, float), np.asarray(upper, float)
    x = np.clip(np.asarray(x0, float), lower, upper)
    r = residuals(x)
    cost = float(r @ r)
    damping = 1e-3
    for _ in range(iterations):
        J = _jacobian(residuals, x, lower, upper)
        grad = J.T @ r
        free = ~(((x <= lower) & (grad > 0)) | ((x >= upper) & (grad < 0)))   # held at a bound: left out
        if not free.any() or cost == 0:
            break
        improved = False
        while damping < 1e12:
            A = J[:, free].T @ J[:, free]
            A = A + damping * np.diag(np.maximum(np.diag(A), 1e-12))
            step = np.zeros_like(x)
            step[free] = np.linalg.solve(A, -grad[free])
            trial = np.clip(x + step, lower, upper)
            r_trial = residuals(trial)
            c_trial = float(r_trial @ r_trial)
            if c_trial < cost:
                improved = True
                gain = cost - c_trial
                x, r, cost = trial, r_trial, c_trial
                damping = max(damping / 10, 1e-12)
                break
            damping *= 10
        if not improved or gain <= tolerance * max(cost, 1e-300):
            break
    return x


def separable(residuals: Callable, x, lower, upper, tolerance: float = 1e-6) -> bool:
    """Whether the runs tell the variables apart at ``x``: the Jacobian of ``residuals`` has full
    column rank (its smallest singular value above ``tolerance`` times its largest)."""
    J = _jacobian(residuals, np.asarray(x, float), np.asarray(lower, float), np.asarray(upper, float))
    sv = np.linalg.svd(J, compute_uv=False)
    return len(sv) == J.shape[1] and sv[0] > 0 and sv[-1] > tolerance * sv[0]


def _jacobian(residuals: Callable, x: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Central differences of ``residuals`` at ``x``, one-sided at a bound of the box."""
    columns = []
    for i in range(len(x)):
        h = 1e-6 * max(1.0, abs(x[i]))
        up, down = x.copy(), x.copy()
        up[i] = min(x[i] + h, upper[i])
        down[i] = max(x[i] - h, lower[i])
        width = up[i] - down[i]
        columns.append((residuals(up) - residuals(down)) / width if width > 0 else np.zeros_like(residuals(x)))
    return np.stack(columns, axis=1)
