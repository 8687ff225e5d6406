"""Oracle (Neyman-Pearson) power for +2% on each 20-100us test of the example machines:
null = KDE of the test's full recorded series (bandwidth h), alternative = null shifted by
log(1.02), n iid fresh sessions, level alpha/54 (one look). Importance sampling under H1."""

import math
import sys

import numpy as np

sys.path.insert(0, ".")
sys.path.insert(0, "bench")
import resample as R

rng = np.random.default_rng(1)
ms = [m for m in R.load() if m.suite == "example"]
level = 0.01 / 54
delta = math.log(1.02)


def logpdf(y, pts, h):
    z = (y[..., None] - pts) / h
    return np.log(np.mean(np.exp(-0.5 * z * z), axis=-1) / (h * math.sqrt(2 * math.pi)) + 1e-300)


res = {}
for h in (0.0005, 0.001, 0.002):
    for n in (3, 5, 7):
        pw_all = []
        for m in ms:
            for i in range(54):
                if not (20 <= m.duration_us[i] < 100):
                    continue
                pts = m.x[i] - np.median(m.x[i])
                N = 40000
                y1 = pts[rng.integers(len(pts), size=(N, n))] + rng.normal(0, h, (N, n)) + delta
                s1 = (logpdf(y1 - delta, pts, h) - logpdf(y1, pts, h)).sum(
                    -1
                )  # log LR under H1 draws
                # P0(S > c) = E1[exp(-S) 1{S>c}]
                order = np.sort(s1)[::-1]
                tail = np.cumsum(np.exp(-order)) / N
                idx = np.searchsorted(tail, level)  # first index where tail >= level
                power = idx / N
                pw_all.append(
                    (
                        m.gpu_name[-4:] if "H100" not in m.gpu_name else "H100",
                        m.name[4:8],
                        m.keys[i].split("::")[-1],
                        power,
                    )
                )
        arr = np.array([p[3] for p in pw_all])
        h100 = np.array([p[0] == "H100" for p in pw_all])
        print(
            f"h={h * 100:.2f}% n={n}: oracle power all {arr.mean():.3f}  "
            f"H100 {arr[h100].mean():.3f}  H200 {arr[~h100].mean():.3f}  min {arr.min():.3f}",
            flush=True,
        )
        if n == 7 and h == 0.001:
            for p in pw_all:
                if p[3] < 0.99:
                    print("   ", p)
