"""Judge recorded sessions again with the current rule: what a change of the rule or its
prior would have said of measurements already taken on a GPU.

    python bench/rejudge.py BASELINE.json REPORT.json [REPORT.json ...]

REPORT files come from ``pytest --gpubench --gpubench-json``; each result's first session,
then its recorded confirmations batch by batch while the gate asks for more, are judged
against BASELINE's entry of the same key, as the plugin does (judge.gate.Gate), with the
family size of the report.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections import Counter
from pathlib import Path

from pytest_gpubench.core.records import Result
from pytest_gpubench.core.settings import MeasureSettings
from pytest_gpubench.judge.gate import Gate
from pytest_gpubench.store import baseline as store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("baseline", type=Path)
    parser.add_argument("reports", nargs="+", type=Path)
    args = parser.parse_args()
    base = store.load(args.baseline)
    totals: Counter[str] = Counter()
    for path in args.reports:
        results = [Result.from_dict(r) for r in json.loads(path.read_text())["results"]]
        gate = Gate(family=max((r.verdict.family for r in results), default=1))
        found: Counter[str] = Counter()
        for r in results:
            entry = base.entries.get(r.key)
            settings = MeasureSettings(threshold=r.measurement.threshold)
            recorded = r.measurement.confirmations
            # Sessions as the gate asks for them: the first, then batches of the recorded
            # confirmations while it wants more; a batch it wants that was never recorded
            # (the rule of the run asked for fewer) is counted apart, not judged.
            taken = 0
            infos = {**base.sessions, **r.measurement.session_infos}  # each session's GPU
            result = gate.judge(
                dataclasses.replace(r.measurement, confirmations=()), entry, settings, infos
            )
            while gate.needs_confirmation(result) and taken < len(recorded):
                taken = min(len(recorded), taken + gate.design.batch)
                measured = dataclasses.replace(r.measurement, confirmations=recorded[:taken])
                result = gate.judge(measured, entry, settings, infos)
            status = result.verdict.status.value
            if gate.needs_confirmation(result):
                status = f"{status}, wants sessions not recorded"
            found[status] += 1
            if status not in ("ok", "new") or r.status.value != status:
                print(
                    f"{path.name}: {r.test}: was {r.status.value}, now {status}: "
                    f"{result.verdict.reason}"
                )
        totals.update(found)
        print(f"{path.name}: {dict(found)}")
    print(f"all: {dict(totals)}")


if __name__ == "__main__":
    main()
