"""VS Code's metrics, with the semantics of OSWorld's `metrics/vscode.py`: its settings and keybindings
files (JSON; VS Code writes keybindings.json after a comment line) and its list of extensions."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets

from computerrl.tasks.registry import metric

MAX_BYTES = 4 << 20  # a settings file the agent inflated is not read whole


def _json(path, skip_first_line: bool = False):
    """The file's JSON, or None (absent, too big, not JSON)."""
    try:
        with open(path, encoding="utf-8") as f:
            if skip_first_line:
                f.readline()
            text = f.read(MAX_BYTES + 1)
    except (OSError, UnicodeDecodeError):
        return None
    try:
        return json.loads(text) if len(text) <= MAX_BYTES else None
    except ValueError:
        return None


@metric("check_json_settings")
def check_json_settings(actual, expected, **_) -> float:
    """1 if every key of `expected["expected"]` is in the settings file with that value."""
    data = _json(actual) if actual else None
    if not isinstance(data, dict):
        return 0.0
    return float(all(key in data and data[key] == value for key, value in expected["expected"].items()))


@metric("check_json_keybindings")
def check_json_keybindings(actual, expected, **_) -> float:
    """1 if the keybindings file (a list; read as it is, else past its first line) holds `expected["expected"]`."""
    for skip in (False, True):
        data = _json(actual, skip) if actual else None
        if isinstance(data, list):
            return float(expected["expected"] in data)
    return 0.0


@metric("is_extension_installed")
def is_extension_installed(actual, rules, **_) -> float:
    """`rules["type"]` "contain" (or "not_contain"): whether `rules["expected"]` is in the command's output."""
    if rules.get("type") not in ("contain", "not_contain"):
        raise ValueError(f"is_extension_installed: rule type {rules.get('type')!r} (known: contain, not_contain)")
    if actual is None:  # the command did not run
        return 0.0
    found = rules["expected"] in actual
    return float(found if rules["type"] == "contain" else not found)


# Loads the test file as OSWorld does (its folder the working directory and first on sys.path), calls its
# test function and makes OSWorld's score of what it returns. The score leaves on the jail's report socket
# with its MAC under the per-run key read from stdin straight into the hash (no name holds it), and nothing
# else the jail says is believed. What the verdict needs is bound to main's locals before the agent's code
# is imported, so rebinding builtins, os.write or this module's names changes nothing; an exit, a print or
# an error leaves no report, or a 0; a reader planted on the descriptor learns a MAC of that verdict only.
TEST_SUITE_RUNNER = """
import hashlib, importlib.util, os, sys
def main(path, name, write=os.write, leave=os._exit, getattr=getattr, callable=callable, isinstance=isinstance,
         float=float, max=max, min=min, repr=repr, numbers=(bool, int, float), error=BaseException):
    mac = hashlib.blake2b(key=sys.stdin.buffer.read())
    report = int(os.environ["COMPUTERRL_REPORT_FD"])
    try:
        spec = importlib.util.spec_from_file_location("test_suite_module", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)  # the agent's modules run from here on, in this interpreter
        test = getattr(module, name, None)
        result = test() if callable(test) else 0.0
        verdict = max(0.0, min(1.0, float(result))) if isinstance(result, numbers) else 1.0 if result else 0.0
    except error:
        verdict = 0.0
    said = repr(verdict).encode()
    mac.update(said)
    write(report, said + b" " + mac.hexdigest().encode() + b"\\n")
    leave(0)  # before any exit handler of the agent's code runs
sys.path.insert(0, ".")
main(sys.argv[1], sys.argv[2])
"""
TEST_SUITE_TIMEOUT_S = 45.0


@metric("check_python_file_by_test_suite")
def check_python_file_by_test_suite(actual_files, test_file, **options) -> float:
    """OSWorld's: the task's test file, beside the agent's files, has its test function (option
    `test_function_name`, default "test") called; what it returns is the score (a bool, or a number
    clamped to [0, 1]); any error is 0. The agent's code runs in a throwaway jail (envs/desktop/jail.py), never
    here, with no display (pygame's dummy video and audio drivers).

    This score comes from an interpreter the agent's code shared with the test, as in OSWorld: code that
    rewrites the test, or what the test compares, from inside passes it. The verdict travels with a MAC
    under a per-run key only the runner holds, on a socket read once the jail is gone, so printing it,
    writing it to any descriptor, exiting early or rebinding builtins scores 0. What the MAC cannot stop
    is code written to dig into the runner's own objects (the hash in its frame's locals, or the key in
    its memory through /proc/self/mem): that can forge, and only a test run apart from the agent's code,
    which OSWorld's tests are not written for, would close it."""
    from computerrl.envs.desktop.jail import run_in_jail

    files = [f for f in ([actual_files] if isinstance(actual_files, str) else actual_files or []) if f]
    if not test_file or not all(os.path.isfile(f) for f in [*files, test_file]):
        return 0.0
    # OSWorld's getters fetch into one folder, and the test imports every file fetched, not only those
    # the metric is given (a multi-file vm_file gives its first): the folders of both, the test's last.
    folders = dict.fromkeys(os.path.dirname(f) for f in [*files, test_file])
    beside = [os.path.join(d, n) for d in folders for n in sorted(os.listdir(d)) if n != os.path.basename(test_file)]
    name = options.get("test_function_name", "test")
    key = secrets.token_bytes(32)
    jailed = run_in_jail(["python3", "-I", "-c", TEST_SUITE_RUNNER, os.path.basename(test_file), name],
                         [p for p in beside if os.path.isfile(p)] + [test_file], timeout_s=TEST_SUITE_TIMEOUT_S,
                         env={"SDL_VIDEODRIVER": "dummy", "SDL_AUDIODRIVER": "dummy"}, stdin=key, report=True)
    line, newline, after = jailed.report.partition(b"\n")
    said, _, mac = line.partition(b" ")
    genuine = hmac.compare_digest(mac, hashlib.blake2b(said, key=key).hexdigest().encode())
    if jailed.code != 0 or not newline or after or not genuine:  # one line, the runner's: nothing beside it
        return 0.0
    score = float(said)  # the runner's repr of a float
    return score if 0.0 <= score <= 1.0 else 0.0
