import sys
import time

sys.path.insert(0, ".")
sys.path.insert(0, "bench")
import resample as R

ms = R.load()
runs = int(sys.argv[1]) if len(sys.argv) > 1 else 250
which = sys.argv[2] if len(sys.argv) > 2 else "pf"
if "p" in which:
    for thr, s in ((0.02, 0.02), (0.05, 0.05)):
        t = time.time()
        o = R.simulate(ms, R.Config(k=20, slowdown=s, threshold=thr), runs)
        out = [f"{lab} {v:.3f}" for lab, v, c in R.by_class(o, o.flagged.astype(float))]
        print(
            f"power thr {thr} +{s}: {out} conf/run {o.confirmations:.1f} ({time.time() - t:.0f}s)",
            flush=True,
        )
if "f" in which:
    for thr in (0.02, 0.05):
        for outl in (False, True):
            t = time.time()
            o = R.simulate(ms, R.Config(k=20, threshold=thr, outliers=outl), 4 * runs)
            print(
                f"false thr {thr} outliers {outl}: {o.failed_runs}/{o.runs} "
                f"conf/run {o.confirmations:.2f} ({time.time() - t:.0f}s)",
                flush=True,
            )
