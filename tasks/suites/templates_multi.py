"""Multi-app templates: data moves between a text file (terminal) and a spreadsheet (Calc)."""

from __future__ import annotations

from computerrl.tasks.suites import (GUI_SAVE_EXIT, HOME, PEOPLE, SAVE_EXIT, SHEET_DATA, Instance, calc_task,
                                     cloud_file, download, goto_cell, open_step, template, vm_file, xlsx)


@template("multi_text_to_sheet", "multi")
def text_to_sheet(rng, index):
    values = [rng.randint(1, 999) for _ in range(rng.randint(3, 7))]
    inst = calc_task("The file ~/numbers.txt holds one number per line. Enter them, in order, into column A of "
                     "the open sheet from A2 down (under the header 'Value') and save.",
                     [["Value"]], xlsx([["Value"], *[[v] for v in values]]), SHEET_DATA,
                     [f"CalcTools.set_column_values('A', {values!r}, 2)", *SAVE_EXIT], {"values": values},
                     gui_solution=[*goto_cell(1, 2), *[f"Agent.type(text='{v}', enter=True)" for v in values],
                                   *GUI_SAVE_EXIT])
    inst.task["config"].insert(0, download(("numbers.txt", f"{HOME}/numbers.txt")))
    inst.task["related_apps"].append("terminal")
    inst.files["numbers.txt"] = "".join(f"{v}\n" for v in values).encode()
    return inst


def _sheet_to_text(instruction: str, rows: list, answer_lines: list[str], command: str, params: dict) -> Instance:
    path = f"{HOME}/book.xlsx"
    task = {"instruction": instruction, "snapshot": "libreoffice_calc", "source": "computerrl-suite",
            "related_apps": ["libreoffice_calc", "terminal"],
            "config": [download(("book.xlsx", path)), open_step(path)],
            "evaluator": {"func": "compare_text_file", "result": vm_file(f"{HOME}/answer.txt"),
                          "expected": cloud_file("gold.txt")}}
    return Instance(task, {"book.xlsx": xlsx(rows), "gold.txt": "".join(s + "\n" for s in answer_lines).encode()},
                    ["Agent.open_app('terminal')", f"Agent.type(text={command!r}, enter=True)", "Agent.wait()",
                     "Agent.exit(True)"], params)


@template("multi_sheet_total_to_text", "multi")
def sheet_total_to_text(rng, index):
    values = [rng.randint(1, 300) for _ in range(rng.randint(3, 6))]
    total = sum(values)
    return _sheet_to_text("Add up the amounts in column B of the open sheet and write the total, just the number, "
                          "into ~/answer.txt.", [["Item", "Amount"], *[[f"Row {i}", v] for i, v in
                                                                        enumerate(values, 1)]],
                          [str(total)], f"echo {total} > ~/answer.txt", {"values": values})


@template("multi_names_to_text", "multi")
def names_to_text(rng, index):
    names = rng.sample(PEOPLE, rng.randint(2, 5))
    return _sheet_to_text("Write the names listed in column A of the open sheet (below the header) into "
                          "~/answer.txt, one per line, in the same order.", [["Name"], *[[n] for n in names]],
                          names, "printf '%s\\n' " + " ".join(names) + " > ~/answer.txt", {"names": names})
