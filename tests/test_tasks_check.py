"""Task files in OSWorld's format: field-by-field errors, and `computerrl tasks check`."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import socket
import socketserver
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from computerrl.cli.main import app
from computerrl.tasks.task import TaskError, load_task, parse_task

OSWORLD = Path(__file__).resolve().parents[2] / "shared" / "osworld"  # 350 of OSWorld's task files

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


def test_tasks_that_would_start_solved_offline_or_without_osworlds_package_are_unsupported():
    cookies = {"func": "is_cookie_deleted", "result": {"type": "cookie_data", "dest": "Cookies"},
               "expected": {"type": "rule", "rules": {"type": "domains", "domains": [".amazon.com"]}}}
    offline = parse_task({**CALC_TASK, "evaluator": cookies}).unsupported()
    assert any("'is_cookie_deleted' without the network" in m for m in offline), offline
    assert parse_task({**CALC_TASK, "evaluator": cookies, "network": True}).unsupported() == []
    [absent] = parse_task(_shell_task("gone", "dpkg -l | grep mahjongg", "")).unsupported()  # os/ddc75b62's check
    assert absent.startswith("package 'mahjongg' (in OSWorld's VM, not in the desktop")
    assert parse_task(_shell_task("here", "dpkg -l | grep bubblewrap", "")).unsupported() == []  # install.sh's


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
        "malformed": 0, "needs_account": 1, "agent_code": 0}


def rule_task(command, shell=False) -> dict:
    return {**CALC_TASK, "evaluator": {"func": "check_include_exclude",
                                       "result": {"type": "vm_command_line", "command": command, "shell": shell},
                                       "expected": {"type": "rule", "rules": {"include": ["ok"], "exclude": []}}}}


@pytest.mark.parametrize("command, why", [
    ("bash eval.sh", "bash runs eval.sh"),  # OSWorld's os tasks: a script in the agent's home
    (["python3", "/home/user/firefox_decrypt.py", "/home/user/.thunderbird"], "python3 runs /home/user/firefox_"),
    ("python ~/Desktop/script.py", "python runs ~/Desktop/script.py"),
    (["/bin/bash", "-c", "cd /home/user/repo; git log --oneline | head -n 1"], "git runs the programs"),
    ("./run.sh && echo ok", "it runs ./run.sh"),
    (["sh", "-c", "bash -x /tmp/check.sh"], "bash runs /tmp/check.sh"),
    (["python", "-c", "from InstructorEmbedding import INSTRUCTOR;"], "python imports InstructorEmbedding"),
    (["python", "-c", "import pyautogui; pyautogui.hotkey('ctrl', 's');"], ""),  # a module of the system's
    (["python3", "-c", "import json, os.path; print(json.dumps(1))"], ""),  # the standard library's
    (["code", "--list-extensions", "|", "grep", "mattn.lisp"], ""),  # the desktop's own launcher
    ("cat ~/.bash_history | grep -E 'soffice'", ""),  # reads the agent's files: that is the state scored
    (["libreoffice", "--convert-to", "csv", "--outdir", "/home/user", "/home/user/a.xlsx"], ""),
])
def test_evaluation_commands_that_run_a_file_the_agent_can_rewrite_are_told_apart(command, why):
    found = parse_task(rule_task(command)).agent_code()
    assert (found[0].split(": ", 1)[1].startswith(why) if why else found == []), found


def test_tasks_check_counts_the_tasks_scored_by_the_agents_files_apart(tmp_path):
    write(tmp_path, "eval_sh.json", rule_task("bash eval.sh", shell=True))
    write(tmp_path, "good.json", CALC_TASK)
    result = CliRunner().invoke(app, ["tasks", "check", str(tmp_path), "--json", "--verbose"])
    assert result.exit_code == 0, result.output  # supported all the same: their scores are marked
    assert "1 of the supported score by running a file the agent can rewrite" in result.output
    assert "eval_sh.json: scored by what the agent can rewrite (bash eval.sh: bash runs eval.sh" in result.output
    assert json.loads(result.output.strip().splitlines()[-1])["agent_code"] == 1


@pytest.mark.skipif(not OSWORLD.exists(), reason="needs ../shared/osworld")
def test_the_osworld_tasks_scored_by_the_agents_files_are_these_ten():
    flagged = {p.stem[:8] for p in OSWORLD.rglob("*.json") if load_task(p).agent_code()}
    assert flagged == {"2c9fc0de", "ce2b64a2", "da922383", "4d117223", "5c1075ca", "5ced85fc", "7b6c7e24",
                       "bb5e4c0d", "69acbb55", "9219480b"}  # git log; two scripts of the agent's; three eval.sh;
    # firefox_decrypt.py twice; a module the agent installs (InstructorEmbedding); tetris's test suite


def test_tasks_check_skips_a_fifo_named_json_without_opening_it(tmp_path):
    write(tmp_path, "good.json", CALC_TASK)
    os.mkfifo(tmp_path / "x.json")  # opening it for reading would wait for a writer that never comes
    done = subprocess.run([sys.executable, "-m", "computerrl.cli.main", "tasks", "check", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "x.json: a FIFO, not a regular file (not read)" in done.stdout, done.stdout
    assert "1 load and are supported" in done.stdout and "1 malformed" in done.stdout


def test_tasks_check_exits_zero_when_everything_loads(tmp_path):
    write(tmp_path, "good.json", CALC_TASK)
    result = CliRunner().invoke(app, ["tasks", "check", str(tmp_path)])
    assert result.exit_code == 0 and "1 load and are supported" in result.output


def test_tasks_check_on_an_empty_folder_is_a_clear_error(tmp_path):
    result = CliRunner().invoke(app, ["tasks", "check", str(tmp_path)])
    assert result.exit_code == 2 and "expected a folder of OSWorld task files, found an empty folder" in result.output


def test_commands_run_as_written():
    from computerrl.tasks.setup import shell_argv

    # /home/user is the desktop's literal home in its sandbox: nothing is rewritten.
    assert shell_argv(["cp", "/home/user/a.txt", "/home/username/b"], False) == ["cp", "/home/user/a.txt",
                                                                                 "/home/username/b"]
    assert shell_argv("ls /home/user/Desktop", True) == ["sh", "-c", "ls /home/user/Desktop"]  # /bin/sh, as OSWorld's


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
    # an install of packages the desktop holds (install.sh's jq and unzip) succeeds offline: compat/bin/apt-get
    ({"type": "execute", "parameters": {"command": "echo password | sudo -S apt-get update -y && echo password | "
                                        "sudo -S apt-get install unzip -y && unzip a.zip", "shell": True}}, []),
    ({"type": "execute", "parameters": {"command": "sudo apt install jq zsh -y", "shell": True}},
     ["'apt install' (needs the network)"]),
    ({"type": "execute", "parameters": {"command": "jq . a.json > temp 2>&1 && mv temp a.json; echo \"$X\"",
                                        "shell": True}}, []),
    ({"type": "execute", "parameters": {"command": ["python", "-c", "import os; no_such_program()"]}}, []),
    # found in use: a redirection after a subshell, or before a command, names a file or a descriptor, never a program
    ({"type": "execute", "parameters": {"command": "(cd /tmp && ls) > /tmp/out 2>&1", "shell": True}}, []),
    ({"type": "execute", "parameters": {"command": "(ls /tmp) >> /tmp/out 2>/dev/null", "shell": True}}, []),
    ({"type": "execute", "parameters": {"command": "(ls) &> /tmp/out; (ls) 1>&2 | cat", "shell": True}}, []),
    ({"type": "execute", "parameters": {"command": "2>/dev/null ls /tmp", "shell": True}}, []),
    ({"type": "execute", "parameters": {"command": ["bash", "-c", "(ls)>/tmp/out 2>&1 && true"]}}, []),
    ({"type": "execute", "parameters": {"command": "(ls) > /tmp/out 2>&1; no-such-tool", "shell": True}},
     ["program 'no-such-tool' (not in the desktop)"]),
    ({"type": "execute", "parameters": {"command": "ls;>/tmp/out no-such-tool", "shell": True}},
     ["program 'no-such-tool' (not in the desktop)"]),
])
def test_a_task_is_supported_only_if_the_programs_it_starts_are_in_the_desktop(step, needs):
    assert parse_task({**CALC_TASK, "config": [step]}).unsupported() == needs


class Server(http.server.ThreadingHTTPServer):
    def server_bind(self):  # as HTTPServer's, less getfqdn: a reverse DNS lookup of 127.0.0.2 could leave the host
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


@contextlib.contextmanager
def web(routes, host="127.0.0.1", port=0):
    """A real HTTP server on `host` (loopback only): `routes` maps a path to bytes served whole or to a
    function answering with the request handler. Yields its base URL and the paths asked for."""
    asked = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            asked.append(self.path)
            answer = routes.get(self.path)
            if answer is None:
                self.send_error(404)
            elif isinstance(answer, bytes):
                self.send_response(200)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
            else:
                try:
                    answer(self)
                except OSError:
                    pass  # the fetch hung up on us, as the test wants

    server = Server((host, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://{host}:{server.server_port}", asked
    finally:
        server.shutdown()
        server.server_close()


def redirect(location):
    def answer(handler):
        handler.send_response(302)
        handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()
    return answer


class FakeDNS(dict):
    """name → its answers, one per lookup (the last repeats; a tuple is several addresses at once);
    `lookups` lists the names looked up."""

    def __init__(self):
        super().__init__()
        self.lookups = []


@pytest.fixture
def dns(monkeypatch):
    """Names resolved by the test, never by a DNS server: numeric hosts resolve as usual, names the
    test sets in the returned FakeDNS to its answers, any other name fails."""
    real, fake = socket.getaddrinfo, FakeDNS()

    def getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):
        if host in fake:
            fake.lookups.append(host)
            now = fake[host].pop(0) if len(fake[host]) > 1 else fake[host][0]
            return [a for ip in (now if isinstance(now, tuple) else (now,))
                    for a in real(ip, port, family, type, proto, flags | socket.AI_NUMERICHOST)]
        return real(host, port, family, type, proto, flags | socket.AI_NUMERICHOST)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return fake


def hostport(base: str) -> str:
    """'127.0.0.1:PORT' of a base URL: what --allow-host lets through."""
    return base.split("//", 1)[1]


def downloading(tmp_path, *urls):
    """A task folder holding one task that downloads `urls` (its evaluator compares with the first)."""
    tasks = tmp_path / "tasks"
    tasks.mkdir(exist_ok=True)
    write(tasks, "t.json", {**CALC_TASK, "config": [{"type": "download", "parameters": {"files": [
        {"url": url, "path": f"/home/user/{i}.bin"} for i, url in enumerate(urls)]}}],
        "evaluator": {**CALC_TASK["evaluator"], "expected": {"type": "cloud_file", "path": urls[0], "dest": "gold"}}})
    return tasks


def fetch(tasks, cache, *options):
    return CliRunner().invoke(app, ["tasks", "fetch", str(tasks), "--cache", str(cache), *options])


def cached(cache):
    """URL → bytes of what the cache holds; asserts nothing else lies in it, whole or partial."""
    index = json.loads((cache / "index.json").read_text()) if (cache / "index.json").exists() else {}
    stored = sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file() and p.name != "index.json")
    assert stored == sorted(index.values()), stored
    return {url: (cache / rel).read_bytes() for url, rel in index.items()}


def test_tasks_fetch_fills_the_cache_resumes_and_names_what_failed(tmp_path):
    """Against a real HTTP server on loopback, which --allow-host lets it fetch from."""
    import functools

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

    server = Server(("127.0.0.1", 0), functools.partial(Handler, directory=str(served)))
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
        first = fetch(tasks, cache, "--allow-host", f"127.0.0.1:{server.server_port}")
        assert first.exit_code == 1 and f"{base}/missing.xlsx: HTTP 404" in first.output
        assert f"{base}/short.bin" in first.output and f"{base}/short.bin" not in json.loads(
            (cache / "index.json").read_text())  # cut short: never cached as if whole
        index = json.loads((cache / "index.json").read_text())
        assert (cache / index[f"{base}/data.xlsx"]).read_bytes() == b"xlsx bytes"
        assert (cache / index[f"{base}/gold.txt"]).read_bytes() == b"gold"
        assert not list(cache.rglob("*.part"))
        (served / "missing.xlsx").write_bytes(b"late")
        requests.clear()
        again = fetch(tasks, cache, "--allow-host", f"127.0.0.1:{server.server_port}")
        assert "2 already in" in again.output and again.exit_code == 1  # short.bin still cut short
        assert requests and all("missing" in r or "short" in r for r in requests), requests  # only what was missing
        assert (cache / json.loads((cache / "index.json").read_text())[f"{base}/missing.xlsx"]).read_bytes() == b"late"
    finally:
        server.shutdown()


def test_tasks_fetch_refuses_a_loopback_address_unless_allowed(tmp_path):
    """The fleet's console answers on loopback: a task file must not get it cached by default."""
    with web({"/fleet": b"<h1>fleet console</h1>"}) as (base, asked):
        tasks, cache = downloading(tmp_path, f"{base}/fleet"), tmp_path / "cache"
        refused = fetch(tasks, cache)
        assert refused.exit_code == 1, refused.output
        assert f"{base}/fleet: refused: 127.0.0.1 is a loopback address" in refused.output
        assert asked == [] and cached(cache) == {}
        port = int(hostport(base).split(":")[1])
        other_port = fetch(tasks, cache, "--allow-host", f"127.0.0.0/8:{port - 1}")  # the host, not its port
        assert other_port.exit_code == 1 and "refused: 127.0.0.1 is a loopback address" in other_port.output
        allowed = fetch(tasks, cache, "--allow-host", f"127.0.0.0/8:{port}")
        assert allowed.exit_code == 0, allowed.output
        assert cached(cache) == {f"{base}/fleet": b"<h1>fleet console</h1>"}
        for bad in ("mirror.lan:80", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:http"):
            refused = fetch(tasks, cache, "--allow-host", bad)
            assert refused.exit_code == 2 and f"not {bad!r}" in refused.output, refused.output


def test_tasks_fetch_checks_every_redirect_even_from_an_allowed_host(tmp_path, dns):
    """An allowed mirror (127.0.0.1 and its port) redirects to the console (127.0.0.2, by address and by a
    name DNS resolves to it; or another port of the mirror's own host): refused at the hop, the console never
    asked, nothing cached."""
    with web({"/fleet": b"console", "/shot/env-000/1": b"\x89PNG"}, host="127.0.0.2") as (console, console_asked), \
            web({"/fleet": b"console"}) as (same_host, same_host_asked):
        dns["console.lan"] = ["127.0.0.2"]
        console_by_name = console.replace("127.0.0.2", "console.lan")
        with web({"/jump": redirect(f"{console}/fleet"), "/shot": redirect(f"{console_by_name}/shot/env-000/1"),
                  "/port": redirect(f"{same_host}/fleet"), "/data.xlsx": b"xlsx"}) as (mirror, _):
            tasks = downloading(tmp_path, f"{mirror}/jump", f"{mirror}/shot", f"{mirror}/port", f"{mirror}/data.xlsx")
            result = fetch(tasks, cache := tmp_path / "cache", "--allow-host", hostport(mirror))
    assert result.exit_code == 1, result.output
    assert f"{mirror}/port: redirected to {same_host}/fleet: refused: 127.0.0.1 is a loopback address" in result.output
    assert same_host_asked == []
    assert f"{mirror}/jump: redirected to {console}/fleet: refused: 127.0.0.2 is a loopback address" in result.output
    assert (f"{mirror}/shot: redirected to {console_by_name}/shot/env-000/1: refused: console.lan (127.0.0.2) is a "
            "loopback address") in result.output
    assert console_asked == [] and cached(cache) == {f"{mirror}/data.xlsx": b"xlsx"}  # the others go on


def test_tasks_fetch_connects_to_the_address_it_checked(tmp_path, dns):
    """A name that resolves to an allowed address, then (a second lookup) to the console: the file
    comes from the address checked, looked up once."""
    with web({"/data.xlsx": b"mirror"}) as (mirror, _):
        port = mirror.rsplit(":", 1)[1]
        with web({"/data.xlsx": b"console"}, host="127.0.0.2", port=int(port)) as (_, console_asked):
            dns["mirror.test"] = ["127.0.0.1", "127.0.0.2"]
            url = f"http://mirror.test:{port}/data.xlsx"
            result = fetch(downloading(tmp_path, url), tmp_path / "cache", "--allow-host", f"127.0.0.1:{port}")
    assert result.exit_code == 0, result.output
    assert cached(tmp_path / "cache") == {url: b"mirror"} and console_asked == [] and dns.lookups == ["mirror.test"]


@pytest.mark.parametrize("name, answer, why", [
    ("lan", "10.1.2.3", "a private address"), ("home", "192.168.1.1", "a private address"),
    ("metadata", "169.254.169.254", "a link-local address"), ("zero", "0.0.0.0", "the unspecified address"),
    ("group", "224.0.0.1", "a multicast address"), ("cgnat", "100.64.0.1", "not a public address"),
    ("six", "::1", "a loopback address"), ("six-ll", "fe80::1", "a link-local address"),
    ("six-site", "fec0::1", "a site-local address"), ("mapped", "::ffff:127.0.0.1", "a loopback address"),
    ("mixed", ("93.184.216.34", "10.0.0.1"), "a private address"),  # one bad answer is enough
])
def test_a_name_that_resolves_to_a_non_public_address_is_refused(dns, name, answer, why):
    from computerrl.tasks.fetch import resolve

    dns[name] = [answer]
    with pytest.raises(OSError, match=f"refused: {name} .* is {why}"):
        resolve(name, 80, [])


def test_a_public_address_or_an_allowed_one_passes_the_check(dns):
    from computerrl.tasks.fetch import allowed_hosts, resolve

    dns["public"], dns["mirror"] = ["93.184.216.34"], ["10.1.2.3"]
    assert resolve("public", 80, []) == (socket.AF_INET, ("93.184.216.34", 80))  # resolved only: nothing contacted
    assert resolve("mirror", 443, allowed_hosts(["10.0.0.0/8:443"])) == (socket.AF_INET, ("10.1.2.3", 443))
    with pytest.raises(OSError, match="refused: mirror .* is a private address"):
        resolve("mirror", 8080, allowed_hosts(["10.0.0.0/8:443"]))  # another port of the mirror


def test_tasks_fetch_refuses_a_file_over_the_size_cap_and_keeps_nothing_of_it(tmp_path):
    def unannounced(handler):  # no Content-Length: the cap must hold while reading
        handler.send_response(200)
        handler.end_headers()
        for _ in range(50):
            handler.wfile.write(b"x" * 1000)

    with web({"/announced.bin": b"x" * 50_000, "/unannounced.bin": unannounced, "/small.bin": b"s" * 100}) as (base, _):
        tasks = downloading(tmp_path, f"{base}/small.bin", f"{base}/announced.bin", f"{base}/unannounced.bin")
        result = fetch(tasks, tmp_path / "cache", "--allow-host", hostport(base), "--max-mb", "0.01")
    assert result.exit_code == 1, result.output
    assert f"{base}/announced.bin: refused: 50,000 bytes, over the 10,485-byte cap" in result.output
    assert f"{base}/unannounced.bin: refused: over the 10,485-byte cap" in result.output
    assert cached(tmp_path / "cache") == {f"{base}/small.bin": b"s" * 100}  # no partial file either


@pytest.mark.parametrize("slow", ["headers", "body"])
def test_tasks_fetch_has_one_deadline_per_url_however_slowly_bytes_come(tmp_path, slow):
    """A byte every 0.5 s resets a per-read timeout forever; --timeout-s 2 must end the URL at 2 s."""
    fast, trickled = {  # 40 bytes trickled: 20 s if nothing cuts them
        "headers": (b"HTTP/1.0 200 OK\r\nContent-Length: 4\r\n", b"X-Slow: " + b"a" * 28 + b"\r\n\r\n"),
        "body": (b"HTTP/1.0 200 OK\r\nContent-Length: 40\r\n\r\n", b"b" * 40)}[slow]

    def trickle(handler):
        handler.wfile.write(fast)
        for byte in trickled:
            handler.wfile.write(bytes([byte]))
            time.sleep(0.5)
        handler.wfile.write(b"body" if slow == "headers" else b"")

    with web({"/slow.bin": trickle}) as (base, _):
        start = time.monotonic()
        result = fetch(downloading(tmp_path, f"{base}/slow.bin"), tmp_path / "cache",
                       "--allow-host", hostport(base), "--timeout-s", "2")
        took = time.monotonic() - start
    assert result.exit_code == 1 and took < 10, (took, result.output)
    assert f"{base}/slow.bin: not done within 2 s" in result.output
    assert cached(tmp_path / "cache") == {}


def test_tasks_fetch_refuses_a_redirect_to_ftp(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as ftp:  # listens, never answers: did anything connect?
        ftp_url = f"ftp://127.0.0.1:{ftp.getsockname()[1]}/a.xlsx"
        with web({"/a.xlsx": redirect(ftp_url)}) as (base, _):
            result = fetch(downloading(tmp_path, f"{base}/a.xlsx"), tmp_path / "cache",
                           "--allow-host", hostport(base), "--timeout-s", "3")
        ftp.setblocking(False)
        with pytest.raises(BlockingIOError):
            ftp.accept()  # no connection waiting
    assert result.exit_code == 1, result.output
    assert f"{base}/a.xlsx: redirected to {ftp_url}: refused: ftp:// (only http and https)" in result.output
    assert cached(tmp_path / "cache") == {}


def test_tasks_fetch_skips_a_fifo_or_device_named_json_without_opening_it(tmp_path):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    write(tasks, "ok.json", {**CALC_TASK, "config": [], "evaluator": {"func": "infeasible"}})  # fetches nothing
    os.mkfifo(tasks / "x.json")  # opening it for reading waits for a writer that never comes
    (tasks / "null.json").symlink_to("/dev/null")
    (tasks / "shadow.json").symlink_to("/etc/shadow")  # root-only: a fetch run as root would read it
    (tasks / "again.json").symlink_to(tasks / "ok.json")  # a link inside the folder is followed
    done = subprocess.run([sys.executable, "-m", "computerrl.cli.main", "tasks", "fetch", str(tasks),
                           "--cache", str(tmp_path / "cache")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"skipped {tasks / 'x.json'}: a FIFO, not a regular file" in done.stderr
    for link in ("null.json", "shadow.json"):
        assert f"skipped {tasks / link}: a link out of the task folder (not followed)" in done.stderr
    assert "2 task files need 0 files" in done.stdout


def test_compare_pptx_files_position_options_are_supported():
    deck = {"func": "compare_pptx_files", "result": {"type": "vm_file", "path": "/home/user/a.pptx", "dest": "a.pptx"},
            "expected": {"type": "cloud_file", "path": "https://example.org/gold.pptx", "dest": "gold.pptx"}}
    for option in ("examine_top_position", "examine_title_bottom_position", "examine_image_size"):
        assert parse_task({**CALC_TASK, "evaluator": {**deck, "options": {option: True}}}).unsupported() == []


def _shell_task(task_id: str, command: str, expected: str, config: list | None = None) -> dict:
    """An os task scored by a shell command's output, as OSWorld's os tasks are."""
    return {"id": task_id, "instruction": "Make the check pass.", "snapshot": "os", "source": "handwritten",
            "config": config or [],
            "evaluator": {"func": "exact_match", "result": {"type": "vm_command_line", "command": command,
                                                            "shell": True},
                          "expected": {"type": "rule", "rules": {"expected": expected}}}}


LOCK_ENABLED = "gsettings get org.gnome.desktop.screensaver lock-enabled"
LOCK_ON = "gsettings set org.gnome.desktop.screensaver lock-enabled true"


@pytest.mark.desktop
def test_tasks_check_run_lists_the_tasks_that_score_untouched_with_the_agents_own_done(server, tmp_path):
    from computerrl.envs.fleet.backends.base import EnvHandle
    from computerrl.envs.fleet.manifest import write_manifest

    srv, _ = server
    tasks, envs, out = tmp_path / "tasks" / "os", tmp_path / "envs", tmp_path / "untouched"
    tasks.mkdir(parents=True)
    missing = [{"type": "download", "parameters": {"files": [{"url": "https://example.org/in.txt",
                                                              "path": "/home/user/in.txt"}]}}]
    # OSWorld's os/a4d98375 and os/cc9d4f34 as written: GNOME's screen lock is off on OSWorld's VM, and its
    # shell is dash, whose `echo -e` leaves the script no shebang (so it runs as "/bin/sh ./my_process.sh")
    process = {**_shell_task("process", "ps -ef | grep my_process.sh", "", [{"type": "execute", "parameters": {
        "command": "echo -e '#!/bin/bash\n\nwhile true; do\necho \"Running my_process...\"\nsleep 1\ndone' > "
                   "my_process.sh && chmod +x my_process.sh && nohup ./my_process.sh > /dev/null 2>&1 &",
        "shell": True}}])}
    process["evaluator"] = {**process["evaluator"], "func": "check_include_exclude", "expected": {
        "type": "rule", "rules": {"include": [], "exclude": ["/bin/sh ./my_process.sh"]}}}
    for name, task in {"solved": _shell_task("solved", "echo ready", "ready\n"),
                       "open": _shell_task("open", "[ -d ~/made ] && echo yes || echo no", "yes\n"),
                       "no-input": _shell_task("no-input", "echo ready", "ready\n", missing),
                       "lock-untouched": _shell_task("lock-untouched", LOCK_ENABLED, "true\n"),
                       "lock-enable": _shell_task("lock-enable", LOCK_ENABLED, "true\n", [{"type": "execute",
                                                  "parameters": {"command": LOCK_ON, "shell": True}}]),
                       "process": process}.items():
        (tasks / f"{name}.json").write_text(json.dumps(task))
    write_manifest(envs, [EnvHandle("env-000", f"127.0.0.1:{srv.port}", "local")], {"env-000": "healthy"})
    argv = ["tasks", "check", str(tasks.parent), "--run", "--envs", str(envs), "--out", str(out), "--json"]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 1, result.output  # a task starts solved
    assert "starts solved: os/solved: scores 1 untouched" in result.output
    summary = json.loads(result.output.strip().splitlines()[-1])["untouched"]
    # the setting is the desktop's to change, and a reset takes it back (os/lock-untouched plays after os/lock-enable)
    assert summary == {"played": 6, "scored": {"os/solved": 1.0, "os/lock-enable": 1.0}, "not_set_up": 1}, summary
    records = {r["task_id"]: r for r in json.loads((out / "untouched.json").read_text())}
    for played in ("os/open", "os/lock-untouched", "os/process"):
        assert records[played]["score"] == 0 and not records[played]["error"], records[played]
    assert records["os/no-input"]["error"].startswith("setup:") and "in.txt" in records["os/no-input"]["error"]
    assert not (out / ".plays").exists()  # whole: nothing left to resume
