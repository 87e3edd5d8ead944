"""build-apis benchmark: validating generated APIs in live desktops, with no model.

    python -m computerrl.bench.bench_apis            # ~2 min: 10 APIs on 2 desktops
    python -m computerrl.bench.bench_apis --desktops 1 --repeats 3

A transcript of 10 correct Calc APIs (each with two tests that set a document up, call it and read
the document back) is replayed by `build-apis` on `--desktops` env servers of a detached
spawn-envs. Reported per build: wall seconds per API (the build's wall time ÷ 10), the median of
each API's own seconds, and the share of those seconds spent in the desktop (the TestApi call: a
clean reset, the worker in the sandbox, the office) against the stage itself (reading answers, the
ast checks, gRPC). Medians over --repeats builds. Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import textwrap
import time
from pathlib import Path

APIS = [  # name, parameters, doc, body, a test body (after "cell('A1')..." set-up)
    ("fill_down", "range_str: str", "Copy the first cell of a range into its other cells.",
     "rng = cell_range(range_str)\ntop = rng.getCellByPosition(0, 0).getFormula()\n"
     "for r in range(1, rng.getRows().getCount()):\n    rng.getCellByPosition(0, r).setFormula(top)",
     "cell('A1').setValue(4)\nfill_down('A1:A3')\nassert cell('A3').getValue() == 4"),
    ("double_values", "range_str: str", "Double every number of a one-column range.",
     "rng = cell_range(range_str)\nfor r in range(rng.getRows().getCount()):\n"
     "    c = rng.getCellByPosition(0, r)\n    c.setValue(c.getValue() * 2)",
     "cell('A1').setValue(4)\ndouble_values('A1:A2')\nassert cell('A1').getValue() == 8"),
    ("negate", "cell_name: str", "Negate the number in a cell.",
     "c = cell(cell_name)\nc.setValue(-c.getValue())",
     "cell('B2').setValue(3)\nnegate('B2')\nassert cell('B2').getValue() == -3"),
    ("upper_case", "range_str: str", "Turn the text of a one-column range to upper case.",
     "rng = cell_range(range_str)\nfor r in range(rng.getRows().getCount()):\n"
     "    c = rng.getCellByPosition(0, r)\n    c.setString(c.getString().upper())",
     "cell('A1').setString('ab')\nupper_case('A1:A1')\nassert cell('A1').getString() == 'AB'"),
    ("set_italic", "range_str: str", "Make the text of a range italic.",
     "from com.sun.star.awt.FontSlant import ITALIC\ncell_range(range_str).CharPosture = ITALIC",
     "set_italic('A1:B2')\nassert cell('B2').CharPosture.value == 'ITALIC'"),
    ("fill_series", "start_cell: str, count: int", "Write 1, 2, … count down from a cell.",
     "_, col, row, _, _ = parse_range(start_cell)\nfor i in range(count):\n"
     "    cell(col_letter(col) + str(row + 1 + i)).setValue(i + 1)",
     "fill_series('C1', 3)\nassert cell('C3').getValue() == 3"),
    ("clear_range", "range_str: str", "Clear the values, text and formulas of a range.",
     "cell_range(range_str).clearContents(1 | 2 | 4 | 16)",
     "cell('A1').setValue(5)\nclear_range('A1:B2')\nassert cell('A1').getString() == ''"),
    ("round_values", "range_str: str, digits: int = 0", "Round every number of a one-column range.",
     "rng = cell_range(range_str)\nfor r in range(rng.getRows().getCount()):\n"
     "    c = rng.getCellByPosition(0, r)\n    c.setValue(round(c.getValue(), digits))",
     "cell('A1').setValue(2.46)\nround_values('A1:A1', 1)\nassert cell('A1').getValue() == 2.5"),
    ("add_sheet", "name: str", "Add a sheet at the end.",
     "doc.getSheets().insertNewByName(name, doc.getSheets().getCount())",
     "add_sheet('Data')\nassert doc.getSheets().hasByName('Data')"),
    ("set_background", "range_str: str, color: str", "Fill the background of a range with a colour.",
     "cell_range(range_str).CellBackColor = parse_color(color)",
     "set_background('A1', '#00FF00')\nassert cell('A1').CellBackColor == 0x00FF00"),
]


def transcript(path: Path, apis: list) -> Path:
    specs = [{"name": n, "signature": f"def {n}({p}) -> None", "doc": d, "tasks": []} for n, p, d, _, _ in apis]
    rows = [{"step": "analyse", "api": "", "round": 1, "answer": json.dumps(specs)}]
    for name, params, doc, body, test in apis:
        code = f"def {name}({params}) -> None:\n    \"\"\"{doc}\"\"\"\n{textwrap.indent(body, '    ')}\n"
        tests = "".join(f"def test_{name}_{k}():\n{textwrap.indent(test, '    ')}\n\n" for k in (1, 2))
        rows += [{"step": "implement", "api": name, "round": 1, "answer": f"```python\n{code}```"},
                 {"step": "tests", "api": name, "round": 1, "answer": f"```python\n{tests}```"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--desktops", type=int, default=2, help="env servers (one desktop each)")
    p.add_argument("--repeats", type=int, default=1, help="builds, each replaying the whole transcript")
    p.add_argument("--apis", type=int, default=len(APIS), help="the first N of the transcript's APIs")
    args = p.parse_args(argv)
    apis = APIS[:args.apis]

    import datasets
    from rich.console import Console

    from computerrl.data.datasets_io import save_atomic
    from computerrl.data.schemas import TASK_FEATURES
    from computerrl.envs.service.client import EnvClient
    from computerrl.stages.build_apis import BuildApisConfig, run
    from computerrl.stages.spawn_envs import SpawnEnvsConfig, run as spawn
    from computerrl.tasks.suites.build import generate, task_rows

    in_desktop = []  # seconds of every TestApi call, as the stage saw them
    plain = EnvClient.test_api

    def timed(self, *a, **k):
        start = time.perf_counter()
        try:
            return plain(self, *a, **k)
        finally:
            in_desktop.append(time.perf_counter() - start)

    EnvClient.test_api = timed
    root = Path(tempfile.mkdtemp(prefix="bench-apis-"))
    train, _ = generate(4, 0, seed=0, templates=["calc_column_stat"])
    save_atomic(datasets.Dataset.from_dict(task_rows(train), features=TASK_FEATURES), root / "tasks")
    replay = transcript(root / "transcript.jsonl", apis)
    started = time.perf_counter()
    if spawn(SpawnEnvsConfig(out=root / "envs", count=args.desktops, detach=True)) != 0:
        raise SystemExit("the env servers did not start")
    print(f"{args.desktops} desktops up in {time.perf_counter() - started:.1f} s")
    walls, medians, shares = [], [], []
    try:
        for k in range(args.repeats):
            in_desktop.clear()
            start = time.perf_counter()
            summary = run(BuildApisConfig(app="calc", tasks=root / "tasks", envs=root / "envs", out=root / f"out-{k}",
                                          replay=replay, max_apis=len(apis)), Console(quiet=True))
            wall = time.perf_counter() - start
            if summary["accepted"] != len(apis):
                raise SystemExit(f"only {summary['accepted']} of {len(apis)} APIs passed: {summary['apis']}")
            seconds = [a["seconds"] for a in summary["apis"]]
            walls.append(wall / len(apis))
            medians.append(statistics.median(seconds))
            shares.append(sum(in_desktop) / sum(seconds))
            print(f"build {k + 1}: {wall:.1f} s for {len(apis)} APIs ({walls[-1]:.2f} s per API of wall time); "
                  f"an API's own time: median {medians[-1]:.2f} s, {shares[-1]:.0%} of it in the desktop")
    finally:
        spawn(SpawnEnvsConfig(out=root / "envs", stop=True))
    result = {"apis": len(apis), "desktops": args.desktops, "wall_s_per_api": round(statistics.median(walls), 3),
              "api_s_p50": round(statistics.median(medians), 3), "desktop_share": round(statistics.median(shares), 3),
              "stage_share": round(1 - statistics.median(shares), 3), "repeats": args.repeats}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
