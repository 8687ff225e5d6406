"""Candidate location/scale estimators for the paired verdict (scratch; not the project's code).

Each estimator maps NaN-padded rows of pair differences (log scale) and the prior pair spread
sigma0 to (d, se, s, df, n_used). ``decide`` applies judge/pairs.py's decision logic to them
(significant at alpha1/looks AND not clearly under the threshold; same; more).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import stats

from pytest_gpubench.judge import pairs, rule

W = pairs.PAIR_PRIOR_WEIGHT


def t_test(diffs, sigma0):
    present = ~np.isnan(diffs)
    n = present.sum(-1)
    x = np.where(present, diffs, 0.0)
    d = x.sum(-1) / n
    ss = np.where(present, (diffs - d[:, None]) ** 2, 0.0).sum(-1)
    df = W + np.maximum(n - 1, 0)
    s = np.maximum(np.sqrt((W * sigma0**2 + ss) / df), pairs.MIN_PAIR_SIGMA)
    return d, s / np.sqrt(n), s, df, n


def huber_beta(k: float) -> float:
    """E[psi_k(Z)^2], Z standard normal (consistency of Huber's proposal 2)."""
    p = stats.norm.cdf(k)
    return float(2 * p - 1 - 2 * k * stats.norm.pdf(k) + 2 * k * k * (1 - p))


def huber(k: float, iters: int = 200, df_clipped: bool = False):
    """Huber M-location with Huber's proposal-2 scale pooled with the prior:

    s^2 = (w sigma0^2 + s^2 sum psi(r_i/s)^2 / beta_k) / (w + n - 1),
    sum psi((d_i - mu)/s) = 0,
    se^2 = (w sigma0^2 + s^2 sum psi(r_i/s)^2) / (w + n - 1) * (n/m)^2 / n,  m = #|r/s|<k,
    df = w + n - 1.  With nothing clipped: the t-test's se exactly."""
    beta = huber_beta(k)

    def est(diffs, sigma0):
        present = ~np.isnan(diffs)
        n = present.sum(-1)
        x = np.where(present, diffs, np.nan)
        mu = np.nanmedian(x, axis=-1)
        df = W + np.maximum(n - 1, 0)
        r = np.where(present, diffs - mu[:, None], 0.0)
        s = np.maximum(np.sqrt((W * sigma0**2 + (r**2).sum(-1)) / df), pairs.MIN_PAIR_SIGMA)
        for _ in range(iters):
            r = np.where(present, diffs - mu[:, None], 0.0)
            u = r / s[:, None]
            psi = np.clip(u, -k, k)
            inside = (np.abs(u) < k) & present
            m = np.maximum(inside.sum(-1), 1)
            s_new = np.sqrt(
                (W * sigma0**2 + s**2 * np.where(present, psi**2, 0).sum(-1) / beta) / df
            )
            s_new = np.maximum(s_new, pairs.MIN_PAIR_SIGMA)
            mu_new = mu + s * np.where(present, psi, 0).sum(-1) / m
            done = np.all(np.abs(mu_new - mu) < 1e-9) and np.all(np.abs(s_new - s) < 1e-9)
            mu, s = mu_new, s_new
            if done:
                break
        r = np.where(present, diffs - mu[:, None], 0.0)
        u = r / s[:, None]
        psi = np.where(present, np.clip(u, -k, k), 0.0)
        m = np.maximum(((np.abs(u) < k) & present).sum(-1), 1)
        v = (W * sigma0**2 + s**2 * (psi**2).sum(-1)) / df
        se = np.sqrt(v) * (n / m) / np.sqrt(n)
        if df_clipped:  # degrees of freedom of the unclipped pairs only
            df = W + np.maximum(m - 1, 0)
        return mu, np.maximum(se, pairs.MIN_PAIR_SIGMA / np.sqrt(n)), np.sqrt(v), df, n

    return est


def trimmed(gamma: float):
    """Trimmed mean, g = floor(gamma n) from each end, h = n - 2g kept; winsorized
    variance pooled with the prior; Yuen's se and df:
    s_w^2 = (w sigma0^2 + sum (win_i - mean(win))^2) / (w + n - 1),
    se^2 = s_w^2 (n - 1) / (h (h - 1)) [h = n: s_w^2 / n], df = w + h - 1."""

    def est(diffs, sigma0):
        present = ~np.isnan(diffs)
        n = present.sum(-1)
        srt = np.sort(np.where(present, diffs, np.inf), axis=-1)
        d = np.empty(len(diffs))
        se = np.empty(len(diffs))
        sw = np.empty(len(diffs))
        dfs = np.empty(len(diffs))
        for nn in np.unique(n):
            rows = n == nn
            g = int(math.floor(gamma * nn))
            h = nn - 2 * g
            a = srt[rows, :nn]
            d[rows] = a[:, g : nn - g].mean(-1)
            win = np.clip(a, a[:, [g]], a[:, [nn - 1 - g]])
            ss = ((win - win.mean(-1, keepdims=True)) ** 2).sum(-1)
            df_own = W + max(nn - 1, 0)
            s2 = np.maximum((W * sigma0[rows] ** 2 + ss) / df_own, pairs.MIN_PAIR_SIGMA**2)
            sw[rows] = np.sqrt(s2)
            factor = (nn - 1) / (h * (h - 1)) if g > 0 else 1 / nn
            se[rows] = np.sqrt(s2 * factor)
            dfs[rows] = W + h - 1
        return d, se, sw, dfs, n

    return est


def decide(est, diffs, sigma0, *, threshold, alpha1, design, n_taken=None):
    """judge/pairs.decide_pairs' logic on another estimator's (d, se, df)."""
    d, se, s, df, n = est(diffs, sigma0)
    if n_taken is None:
        n_taken = (~np.isnan(diffs)).sum(-1)
    ok = n >= 1
    se = np.where(ok, se, np.inf)
    d = np.where(ok, d, 0.0)
    level = alpha1 / design.looks
    with np.errstate(invalid="ignore", divide="ignore"):
        t = d / se
    dfc = np.maximum(df, 1e-3)
    p_up = stats.t.sf(t, dfc)
    p_down = stats.t.cdf(t, dfc)
    effect = math.log1p(threshold)
    up = ok & (p_up < level) & (d > effect - rule.Z_POWER * se)
    down = ok & (p_down < level) & (-d > effect - rule.Z_POWER * se)
    z_same = stats.t.ppf(1 - pairs.SAME_LEVEL, dfc)
    same = ok & ~up & ~down & (d + z_same * se < effect) & (d - z_same * se > -effect)
    final = n_taken >= design.cap
    more = (~up & ~down & ~same & ~final) | (n_taken < design.first)
    q = stats.t.ppf(1 - level, dfc)
    bar = np.maximum(q * se, effect - rule.Z_POWER * se)
    z = np.zeros(len(d))
    extra = {}
    names = {f.name for f in dataclasses.fields(pairs.PairDecision)}
    if "same_margin" in names:
        extra["same_margin"] = z_same * se
    return pairs.PairDecision(
        **extra,
        direction=np.where(up, 1, np.where(down, -1, 0)),
        same=same,
        more=more,
        d=d,
        se=se,
        s=s,
        df=df,
        prior_share=W / dfc,
        p_up=p_up,
        p_down=p_down,
        bar=bar,
        gateable=z,
    )
