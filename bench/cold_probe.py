"""Does zeroing a buffer twice the L2 make a buffer that sits in the L2 read slower? (issue
18: how cuda-event-cold can check its flush). For probes of an eighth, a quarter and a half of
the L2, read by a sum or a copy, after a read or a write of the probe (hot) and after the
flush (cold): the fastest of 7 reads each, in µs, by CUDA events.

    python bench/cold_probe.py
"""

from __future__ import annotations

import torch


def main() -> None:
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    print(f"L2 {l2 / 2**20:.1f} MiB")
    print("probe | read | hot after | hot us | cold us | cold/hot")
    for share in (8, 4, 2):
        probe = torch.ones(l2 // share // 4, dtype=torch.float32, device="cuda")
        out = torch.empty_like(probe)
        reads = {"sum": lambda p=probe: p.sum(), "copy": lambda p=probe, o=out: o.copy_(p)}
        for name, read in reads.items():
            for before in ("read", "write"):

                def timed(prepare, read=read):
                    times = []
                    for _ in range(7):
                        prepare()
                        start.record()
                        read()
                        end.record()
                        end.synchronize()
                        times.append(start.elapsed_time(end) * 1e3)
                    return min(times)

                warm = read if before == "read" else (lambda p=probe: p.fill_(1.0))
                hot = timed(warm)
                cold = timed(flush.zero_)
                print(
                    f"1/{share} L2 | {name} | {before} | {hot:.2f} | {cold:.2f} | {cold / hot:.2f}"
                )


if __name__ == "__main__":
    main()
