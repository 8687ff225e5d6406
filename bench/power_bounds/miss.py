import sys
import time

import numpy as np

sys.path.insert(0, ".")
sys.path.insert(0, "bench")
import resample as R

ms = R.load()
ex = [m for m in ms if m.suite == "example"]
for m in ms:
    print(m.name, m.suite, m.gpu_name, m.x.shape)
for thr, s in ((0.05, 0.05), (0.02, 0.02)):
    t = time.time()
    o = R.simulate(ms, R.Config(k=20, slowdown=s, threshold=thr), 250)
    print("thr", thr, "time", round(time.time() - t, 1), "conf/run", o.confirmations)
    rows = np.arange(len(o.flagged))
    mi = (rows // 54) % 4
    ti = rows % 54
    sel = (o.duration_us >= 20) & (o.duration_us < 100)
    print("power 20-100", o.flagged[sel].mean(), sel.sum())
    for j, m in enumerate(ex):
        for i in range(54):
            r = sel & (mi == j) & (ti == i)
            if r.any() and o.flagged[r].mean() < 0.99:
                x = m.x[i]
                d = (x - np.min(x)) * 100
                print(
                    f"  {m.name} {m.gpu_name[:12]} {m.keys[i][-45:]:45s} {m.duration_us[i]:6.1f}us "
                    f"caught {o.flagged[r].mean():.2f} "
                    f"gateable {np.nanmedian(o.gateable[r]):.3f}  sessions(+% over min): "
                    f"{' '.join(f'{v:.1f}' for v in np.sort(d))}"
                )
