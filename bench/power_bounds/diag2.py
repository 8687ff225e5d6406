import sys

import numpy as np

sys.path.insert(0, ".")
sys.path.insert(0, "bench")
import resample as R

from pytest_gpubench.judge import rule

ms = R.load()
runs = int(sys.argv[1])
thr = float(sys.argv[2])
outl = sys.argv[3] == "1"
orig = rule.decide


def dec(history, current, se, prior, **kw):
    d = orig(history, current, se, prior, **kw)
    for j in np.flatnonzero(d.direction == 1):
        np.median(history[j])
        f = d.fit
        ~np.isnan(current[j : j + 1])
        current[j : j + 1] - f.m[j]
        print(
            "hist (rel m, %):", " ".join(f"{v:.2f}" for v in np.sort((history[j] - f.m[j]) * 100))
        )
        print(
            "cur  (rel m, %):",
            " ".join(f"{v:.2f}" for v in (current[j][~np.isnan(current[j])] - f.m[j]) * 100),
        )
        print(
            f"  sigma {f.sigma[j] * 100:.3f}% slow_rate {f.slow_rate[j]:.2f} "
            f"p_up {d.p_up[j]:.2e} d {d.d[j] * 100:.2f}% bar {d.bar[j] * 100:.2f}"
        )
    return d


rule.decide = dec
o = R.simulate(ms, R.Config(k=20, threshold=thr, outliers=outl), runs)
