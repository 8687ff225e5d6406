import sys

import numpy as np

sys.path.insert(0, ".")
sys.path.insert(0, "bench")
import resample as R

ms = R.load()
ex = [m for m in ms if m.suite == "example"]
runs = int(sys.argv[1])
thr = float(sys.argv[2])
outl = sys.argv[3] == "1"
o = R.simulate(ms, R.Config(k=20, threshold=thr, outliers=outl), runs)
print(o.failed_runs, o.runs)
for r in np.flatnonzero(o.flagged):
    m = ex[(r // 54) % 4]
    i = r % 54
    x = m.x[i]
    d = (x - np.median(x)) * 100
    print(
        r // 54,
        m.gpu_name[-8:],
        m.name[4:8],
        m.keys[i].split("::")[-1],
        f"{m.duration_us[i]:.1f}us",
        " ".join(f"{v:.1f}" for v in np.sort(d)),
    )
