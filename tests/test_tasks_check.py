"""Task files in OSWorld's format: field-by-field errors, and `computerrl tasks check`."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from computerrl.cli.main import app
from computerrl.envs.tasks.task import TaskError, load_task, parse_task

CALC_TASK = {  # the shape of OSWorld's libreoffice_calc tasks
    "id": "calc-sum-0001", "snapshot": "libreoffice_calc", "source": "handwritten",
    "instruction": "Put the sum of A1:A3 in A4.",
    "config": [{"type": "download", "parameters": {"files": [{"url": "https://example.org/a.xlsx",
                                                              "path": "/home/user/a.xlsx"}]}},
               {"type": "open", "parameters": {"path": "/home/user/a.xlsx"}}],
    "related_apps": ["libreoffice_calc"],
    "evaluator": {"func": "compare_table", "result": {"type": "vm_file", "path": "/home/user/a.xlsx", "dest": "a.xlsx"},
                  "expected": {"type": "cloud_file", "path": "https://example.org/a-gold.xlsx", "dest": "gold.xlsx"},
                  "options": {"rules": [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}]},
                  "postconfig": [{"type": "sleep", "parameters": {"seconds": 1}}]},
}


def write(folder, name, data):
    path = folder / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_a_well_formed_task_loads_with_its_metrics_and_getters(tmp_path):
    task = load_task(write(tmp_path, "t.json", CALC_TASK))
    assert task.id == "calc-sum-0001" and task.metrics == ["compare_table"]
    assert [g["type"] for g in task.getters] == ["vm_file", "cloud_file"]


@pytest.mark.parametrize("patch, field", [
    ({"id": 7}, "'id'"),
    ({"instruction": ""}, "'instruction'"),
    ({"config": {"type": "open"}}, "'config'"),
    ({"config": [{"parameters": {}}]}, "'config[0].type'"),
    ({"evaluator": {"func": 3}}, "'evaluator.func'"),
    ({"evaluator": {**CALC_TASK["evaluator"], "conj": "xor"}}, "'evaluator.conj'"),
    ({"evaluator": {**CALC_TASK["evaluator"], "func": ["compare_table", "exact_match"]}}, "'evaluator.result'"),
    ({"evaluator": {**CALC_TASK["evaluator"], "result": {"path": "x"}}}, "'evaluator.result.type'"),
])
def test_a_malformed_task_names_the_file_and_the_field(tmp_path, patch, field):
    path = write(tmp_path, "bad.json", {**CALC_TASK, **patch})
    with pytest.raises(TaskError) as e:
        load_task(path)
    assert str(path) in str(e.value) and field in str(e.value)


def test_not_json_names_the_file(tmp_path):
    path = write(tmp_path, "broken.json", "{ not json")
    with pytest.raises(TaskError, match="broken.json: not JSON"):
        load_task(path)


def test_unsupported_needs_are_named():
    task = parse_task({**CALC_TASK, "evaluator": {**CALC_TASK["evaluator"], "func": "no_such_metric"}})
    missing = task.unsupported()
    assert "metric 'no_such_metric'" in missing


def test_an_unsupported_compare_table_rule_is_named_at_load_time():
    task = parse_task({**CALC_TASK, "evaluator": {**CALC_TASK["evaluator"],
                                                  "options": {"rules": [{"type": "sparkline"}]}}})
    assert task.unsupported() == ["compare_table rule 'sparkline' is not supported"]


def test_a_multi_file_getter_loads_and_its_paths_are_checked():
    def result(**getter):
        return parse_task({**CALC_TASK, "evaluator": {**CALC_TASK["evaluator"], "result": {"type": "vm_file", **getter}}})

    assert result(multi=True, path=["/home/user/a.xlsx", "/home/user/a.csv"], dest=["a.xlsx", "a.csv"],
                  gives=[0, 1]).unsupported() == []
    assert result(multi=True, path=[], dest=["a.xlsx"]).unsupported() == [
        "getter 'vm_file' with path expected a non-empty string, or (with multi) a list of them"]


def test_tasks_check_reports_every_file_and_survives_bad_ones(tmp_path):
    write(tmp_path, "good.json", CALC_TASK)
    write(tmp_path, "bad.json", {**CALC_TASK, "evaluator": {"func": 3}})
    write(tmp_path, "needs.json", {**CALC_TASK, "config": [{"type": "teleport"}], "evaluator": {
        **CALC_TASK["evaluator"], "func": "no_such_metric", "result": {"type": "vm_mind_reader"}}})
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub", "worse.json", "[1, 2")
    result = CliRunner().invoke(app, ["tasks", "check", str(tmp_path), "--verbose"])
    assert result.exit_code == 1
    assert ("4 task files: 1 load and are supported, 1 need what this build lacks, 0 need a network account, "
            "2 malformed") in result.output
    assert "bad.json: field 'evaluator.func'" in result.output
    assert "worse.json: not JSON" in result.output
    assert ("needs.json: needs setup step 'teleport', getter 'vm_mind_reader', metric 'no_such_metric'"
            in result.output)


def test_tasks_that_sign_in_somewhere_are_counted_apart_and_the_json_line_sums_up(tmp_path):
    write(tmp_path, "good.json", CALC_TASK)
    write(tmp_path, "drive.json", {**CALC_TASK, "config": [{"type": "googledrive", "parameters": {}},
                                                           {"type": "login", "parameters": {}}]})
    write(tmp_path, "needs.json", {**CALC_TASK, "evaluator": {**CALC_TASK["evaluator"], "func": "no_such_metric"}})
    result = CliRunner().invoke(app, ["tasks", "check", str(tmp_path), "--json", "--verbose"])
    assert "drive.json: needs a network account (setup step 'googledrive', setup step 'login')" in result.output
    assert json.loads(result.output.strip().splitlines()[-1]) == {
        "files": 3, "supported": 1, "unsupported": 1, "unsupported_by_reason": {"metric 'no_such_metric'": 1},
        "malformed": 0, "needs_account": 1}


def test_tasks_check_exits_zero_when_everything_loads(tmp_path):
    write(tmp_path, "good.json", CALC_TASK)
    result = CliRunner().invoke(app, ["tasks", "check", str(tmp_path)])
    assert result.exit_code == 0 and "1 load and are supported" in result.output


def test_tasks_check_on_an_empty_folder_is_a_clear_error(tmp_path):
    result = CliRunner().invoke(app, ["tasks", "check", str(tmp_path)])
    assert result.exit_code != 0 and "no *.json files" in result.output


def test_commands_run_as_written():
    from computerrl.envs.tasks.setup import _argv

    # /home/user is the desktop's literal home in its sandbox: nothing is rewritten.
    assert _argv(["cp", "/home/user/a.txt", "/home/username/b"], False) == ["cp", "/home/user/a.txt", "/home/username/b"]
    assert _argv("ls /home/user/Desktop", True) == ["bash", "-c", "ls /home/user/Desktop"]


@pytest.mark.parametrize("step, field, says", [
    ({"type": "sleep", "parameters": {"seconds": "forever"}}, "'config[0].parameters.seconds'", "number of seconds"),
    ({"type": "download", "parameters": {}}, "'config[0].parameters.files'", "missing"),
    ({"type": "download", "parameters": {"files": [{"url": "http://x"}]}}, "'config[0].parameters.files'", "path"),
    ({"type": "open", "parameters": {"path": 3}}, "'config[0].parameters.path'", "string"),
    ({"type": "execute", "parameters": {"command": []}}, "'config[0].parameters.command'", "command"),
    ({"type": "launch", "parameters": {"command": "x", "shell": "yes"}}, "'config[0].parameters.shell'", "true or false"),
    ({"type": "execute", "parameters": {"command": "echo " + "x" * 200_000}}, "'config[0].parameters.command'",
     "too long for the kernel"),
    ({"type": "execute", "parameters": {"command": ["echo", "x" * 200_000]}}, "'config[0].parameters.command'",
     "too long for the kernel"),
])
def test_step_parameters_are_checked_when_the_task_loads(tmp_path, step, field, says):
    path = write(tmp_path, "steps.json", {**CALC_TASK, "config": [step]})
    with pytest.raises(TaskError) as e:
        load_task(path)
    assert str(path) in str(e.value) and field in str(e.value) and says in str(e.value)


def test_hostile_files_are_named_and_the_others_still_checked(tmp_path):
    write(tmp_path, "deep.json", "[" * 100_000 + "]" * 100_000)
    write(tmp_path, "digits.json", '{"id": ' + "9" * 5000 + "}")
    write(tmp_path, "good.json", CALC_TASK)
    result = CliRunner().invoke(app, ["tasks", "check", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert ("3 task files: 1 load and are supported, 0 need what this build lacks, 0 need a network account, "
            "2 malformed") in result.output
    assert "deep.json: not a task: JSON nested too deeply" in result.output
    assert "digits.json: not a task:" in result.output and "digits" in result.output


def test_osworld_flags_written_as_strings_load():
    task = parse_task({**CALC_TASK, "config": [{"type": "execute", "parameters": {"command": "ls", "shell": "true"}}]})
    assert task.config[0]["parameters"]["shell"] == "true"


@pytest.mark.parametrize("getter, says", [
    ({"type": "vm_file", "dest": "a.xlsx"}, "getter 'vm_file' with path missing"),
    ({"type": "vm_file", "path": ""}, "getter 'vm_file' with path expected a non-empty string"),
    ({"type": "vm_command_line"}, "getter 'vm_command_line' with command missing"),
    ({"type": "vm_command_line", "command": "x" * 200_000}, "too long for the kernel"),
    ({"type": "rule"}, "getter 'rule' with rules missing"),
])
def test_a_getter_whose_parameters_cannot_work_is_named_among_the_needs(tmp_path, getter, says):
    """As OSWorld's loader takes it (its vs_code/ae506c68 has an empty cloud_file path): the file loads,
    and the task is unsupported with the reason, never malformed."""
    path = write(tmp_path, "getter.json", {**CALC_TASK, "evaluator": {**CALC_TASK["evaluator"], "result": getter}})
    needs = load_task(path).unsupported()
    assert any(says in n for n in needs), needs


@pytest.mark.parametrize("evaluator, why", [
    ({"func": "", "result": {}, "expected": {}}, "no evaluator (its func is empty)"),
    ("evaluation_dir", 'no evaluator (it is "evaluation_dir", not an object)'),
    (None, "no evaluator (it is missing)"),
    ({"func": ["exact_match", "exact_match"], "conj": "or",  # OSWorld's chrome/b070486d as it is upstream
      "result": [{"type": "rule", "rules": "a"}] * 3, "expected": [{"type": "rule", "rules": {"expected": "a"}}] * 3},
     "no evaluator (OSWorld's loader refuses it: 2 metrics, 3 result getters)"),
])
def test_a_task_without_an_evaluator_loads_and_says_so(tmp_path, evaluator, why):
    data = {k: v for k, v in CALC_TASK.items() if k != "evaluator"}
    if evaluator is not None:
        data["evaluator"] = evaluator
    task = load_task(write(tmp_path, "no-eval.json", data))
    assert task.no_evaluator and task.metrics == [] and task.getters == []
    assert task.unsupported() == [why]


@pytest.mark.parametrize("step, needs", [
    ({"type": "launch", "parameters": {"command": ["no-such-editor", "a.txt"]}},
     ["program 'no-such-editor' (not in the desktop)"]),
    ({"type": "execute", "parameters": {"command": ["/usr/bin/no-such-tool"]}},
     ["program '/usr/bin/no-such-tool' (not in the desktop)"]),
    ({"type": "launch", "parameters": {"command": ["gnome-terminal"]}}, []),  # OSWorld's name: our terminal
    ({"type": "execute", "parameters": {"command": ["python", "-c", "pass"]}}, []),  # the stand-in python
    ({"type": "execute", "parameters": {"command": "export X=1; ls", "shell": True}}, []),
    ({"type": "execute", "parameters": {"command": ["./setup.sh"]}}, []),  # the task's own script
    # found in review: every command of a shell line counts, through sudo, bash -c and redirections
    ({"type": "execute", "parameters": {"command": "export A=1\nno-such-browser &", "shell": True}},
     ["program 'no-such-browser' (not in the desktop)"]),
    ({"type": "execute", "parameters": {"command": ["bash", "-c", "ls && no-such-tool -x"]}},
     ["program 'no-such-tool' (not in the desktop)"]),
    ({"type": "execute", "parameters": {"command": "echo pw | sudo -S apt-get install -y zsh", "shell": True}},
     ["'apt-get install' (needs the network)"]),
    ({"type": "execute", "parameters": {"command": "jq . a.json > temp 2>&1 && mv temp a.json; echo \"$X\"",
                                        "shell": True}}, []),
    ({"type": "execute", "parameters": {"command": ["python", "-c", "import os; no_such_program()"]}}, []),
])
def test_a_task_is_supported_only_if_the_programs_it_starts_are_in_the_desktop(step, needs):
    assert parse_task({**CALC_TASK, "config": [step]}).unsupported() == needs


def test_tasks_fetch_fills_the_cache_resumes_and_names_what_failed(tmp_path):
    """Against a real HTTP server on loopback."""
    import functools
    import http.server
    import threading

    served = tmp_path / "web"
    served.mkdir()
    (served / "data.xlsx").write_bytes(b"xlsx bytes")
    (served / "gold.txt").write_bytes(b"gold")
    requests = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            requests.append(self.path)

        def do_GET(self):
            if self.path == "/short.bin":  # announces 100 bytes, sends 5, hangs up
                self.send_response(200)
                self.send_header("Content-Length", "100")
                self.end_headers()
                self.wfile.write(b"12345")
                self.close_connection = True
                return
            super().do_GET()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(served)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        tasks = tmp_path / "tasks"
        tasks.mkdir()
        write(tasks, "t.json", {**CALC_TASK, "config": [{"type": "download", "parameters": {"files": [
            {"url": f"{base}/data.xlsx", "path": "/home/user/data.xlsx"},
            {"url": f"{base}/missing.xlsx", "path": "/home/user/m.xlsx"},
            {"url": f"{base}/short.bin", "path": "/home/user/s.bin"}]}}],
            "evaluator": {**CALC_TASK["evaluator"], "expected": {"type": "cloud_file", "path": f"{base}/gold.txt",
                                                                 "dest": "gold.txt"}}})
        cache = tmp_path / "cache"
        first = CliRunner().invoke(app, ["tasks", "fetch", str(tasks), "--cache", str(cache)])
        assert first.exit_code == 1 and f"{base}/missing.xlsx: HTTP 404" in first.output
        assert f"{base}/short.bin" in first.output and f"{base}/short.bin" not in json.loads(
            (cache / "index.json").read_text())  # cut short: never cached as if whole
        index = json.loads((cache / "index.json").read_text())
        assert (cache / index[f"{base}/data.xlsx"]).read_bytes() == b"xlsx bytes"
        assert (cache / index[f"{base}/gold.txt"]).read_bytes() == b"gold"
        assert not list(cache.rglob("*.part"))
        (served / "missing.xlsx").write_bytes(b"late")
        requests.clear()
        again = CliRunner().invoke(app, ["tasks", "fetch", str(tasks), "--cache", str(cache)])
        assert "2 already in" in again.output and again.exit_code == 1  # short.bin still cut short
        assert requests and all("missing" in r or "short" in r for r in requests), requests  # only what was missing
        assert (cache / json.loads((cache / "index.json").read_text())[f"{base}/missing.xlsx"]).read_bytes() == b"late"
    finally:
        server.shutdown()


def test_compare_pptx_files_position_options_are_supported():
    deck = {"func": "compare_pptx_files", "result": {"type": "vm_file", "path": "/home/user/a.pptx", "dest": "a.pptx"},
            "expected": {"type": "cloud_file", "path": "https://example.org/gold.pptx", "dest": "gold.pptx"}}
    for option in ("examine_top_position", "examine_title_bottom_position", "examine_image_size"):
        assert parse_task({**CALC_TASK, "evaluator": {**deck, "options": {option: True}}}).unsupported() == []
