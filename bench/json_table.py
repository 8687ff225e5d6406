"""Print a gpubench JSON result file as a short table: timer, median, CUPTI device time of an
eager call, their ratio, verdict and note. Usage: python bench/json_table.py RESULTS.json"""

from __future__ import annotations

import json
import sys


def main() -> None:
    for path in sys.argv[1:]:
        results = json.load(open(path, encoding="utf-8"))["results"]
        head = f"{'test':40} {'timer':11} {'median µs':>10} {'CUPTI µs':>9} {'ratio':>6}"
        print(head + "  verdict  note")
        for r in sorted(results, key=lambda r: r["key"]):
            median = r["summary"]["median_ms"] * 1e3
            cupti = (r.get("device_ms") or 0) * 1e3
            ratio = f"{median / cupti:.3f}" if cupti else "-"
            status = r["verdict"]["status"] if isinstance(r["verdict"], dict) else r["verdict"]
            print(
                f"{r['test'][:40]:40} {r['timer']:11} {median:10.3f} {cupti:9.3f} {ratio:>6}  "
                f"{status:8} {(r.get('note') or '')[:110]}"
            )


if __name__ == "__main__":
    main()
