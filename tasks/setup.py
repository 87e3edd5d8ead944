"""Setup steps of OSWorld tasks (`config` and `evaluator.postconfig`), run inside a desktop.

Everything a step runs or writes happens in the desktop's sandbox: commands run there as its
user, files are written through its view of the file system (so `/home/user` is the literal
home, and a link the agent planted points inside the sandbox only). Commands of the task's setup
run in the desktop's session; those of an evaluation (postconfig, `vm_command_line`) run beside
the keeper, where nothing the agent left running can see, trace or signal them. All the steps of
a Reset or an Evaluate share one time budget, so the call answers within the client's deadline.
What a step reads from the host is restricted: `download` takes files from the task file cache
(`--cache`, whose `index.json` maps URLs to files) or a `file://` path inside that cache or the
task's own folder, and `upload_file` likewise; nothing is fetched from the network. Each step's
parameters are checked when the task loads (`check_parameters`), so a malformed step is named
before any desktop runs it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import shlex
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from computerrl.apis.kit import desktop_path
from computerrl.envs.desktop.sandbox import COMPAT, STAND_IN_NEEDS
from computerrl.tasks.registry import LAUNCH_SETTLES, SETUP_STEPS

if TYPE_CHECKING:
    from computerrl.envs.desktop.desktop import Desktop

COMMAND_TIMEOUT_S = 60.0
SLEEP_MAX_S = 30.0  # a task cannot park a desktop for long
SETUP_BUDGET_S = 40.0  # all of a Reset's setup steps, or of an Evaluate's postconfig and getters (clients wait 60 s)
ARG_MAX_BYTES = 128 * 1024  # the kernel's limit for one argument (MAX_ARG_STRLEN); a command line has fewer
OFFICE_SUFFIXES = {".xlsx", ".xls", ".ods", ".csv", ".docx", ".doc", ".odt", ".rtf", ".pptx", ".ppt", ".odp", ".txt"}
Parameters = dict[str, tuple[Callable[[Any], str], bool]]  # name -> (check, required)
STEP_PARAMETERS: dict[str, Parameters] = {}  # step type -> its parameters
STEP_FILES: dict[str, list[str]] = {}  # step type -> the file-cache URLs it reads besides its parameters' (OSWorld's)


class SetupError(RuntimeError):
    """A setup step that cannot run; the task is skipped with this message."""


# ---- parameter checks: each returns "" when the value is fine, else what was expected -------
def check_string(v) -> str:
    return "" if isinstance(v, str) and v else "expected a non-empty string"


def check_flag(v) -> str:
    return "" if isinstance(v, bool) or v in ("true", "false") else "expected true or false"


def flag(v) -> bool:
    """A flag's value: OSWorld's files write some as the strings "true" and "false"."""
    return v is True or v == "true"


def _seconds(v) -> str:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1e6
    return "" if ok else "expected a number of seconds"


def check_command(v) -> str:
    ok = (isinstance(v, str) and v.strip()) or (isinstance(v, list) and v and all(isinstance(c, (str, int, float))
                                                                                  for c in v))
    if not ok:
        return "expected a command: a string, or a list of strings"
    # `sh -c` takes a string command as one argument, and the kernel refuses an argument this long
    if len((shlex.join(map(str, v)) if isinstance(v, list) else v).encode()) >= ARG_MAX_BYTES:
        return f"command too long for the kernel (at most {ARG_MAX_BYTES // 1024} KiB)"
    return ""


def _files(*keys: str) -> Callable[[Any], str]:
    def check(v) -> str:
        if not isinstance(v, list) or not v:
            return f"expected a non-empty list of files, each with {' and '.join(keys)}"
        for i, f in enumerate(v):
            if not isinstance(f, dict) or any(check_string(f.get(k)) for k in keys):
                return f"item {i}: expected an object with {' and '.join(keys)} (non-empty strings)"
        return ""

    return check


# What an evaluation's commands add to the desktop's environment. HOME stays the agent's (OSWorld's commands
# read ~/.bash_history, VS Code's extensions…), so what a program would load from there is switched off:
# Python's user site (a .pth file there runs at every start) and its current folder on sys.path (a
# ~/pyautogui.py would shadow the module a postconfig imports), git's and pip's user configuration
# (git runs the programs its configuration names). A command that runs the agent's own code anyway (a
# file of its, a module it installs) runs as the agent's own would, and its task says so (Task.agent_code).
TRUSTED_ENV = {"PYTHONNOUSERSITE": "1", "PYTHONSAFEPATH": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
               "PIP_CONFIG_FILE": "/dev/null"}


@dataclasses.dataclass(frozen=True)
class Budget:
    """What the steps of one Reset or Evaluate share: a deadline, and where their commands run."""

    deadline: float  # time.monotonic() by which every step must be done
    trusted: bool = False  # commands run beside the keeper (evaluation) rather than in the desktop's session

    @classmethod
    def of(cls, trusted: bool = False) -> "Budget":
        return cls(time.monotonic() + SETUP_BUDGET_S, trusted)

    def env(self, desktop: "Desktop", argv: list[str] = ()) -> dict[str, str]:
        """The environment of the steps' command `argv`: the desktop's; for an evaluation's, one that nothing
        the agent left in its home can hook into (see TRUSTED_ENV), unless the command runs the agent's own
        code anyway (its task is then marked: agent_code.py)."""
        from computerrl.tasks.agent_code import runs_agent_code

        isolated = self.trusted and not (argv and runs_agent_code(list(argv)))
        return {**desktop.env, **TRUSTED_ENV} if isolated else desktop.env

    def left(self, at_most: float) -> float:
        """Seconds a step may take (at most `at_most`); SetupError once the budget is spent."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise SetupError("the task's steps ran past their time budget "
                             f"({SETUP_BUDGET_S:.0f} s for a Reset's setup or an evaluation)")
        return min(at_most, left)


def step(name: str, **parameters: tuple[Callable[[Any], str], bool]):
    """Register a setup step with its parameters: name=(check, required)."""

    def wrap(fn):
        SETUP_STEPS.add(name, fn)
        STEP_PARAMETERS[name] = parameters
        return fn

    return wrap


def check_parameters(kind: str, params: dict, table: dict[str, Parameters] = STEP_PARAMETERS) -> list[tuple[str, str]]:
    """(parameter, what is wrong) for a step (or, with the getters' table, a getter) of a registered
    type; [] when they are fine."""
    out = []
    for name, (check, required) in table.get(kind, {}).items():
        if name not in params:
            if required:
                out.append((name, "missing"))
        elif problem := check(params[name]):
            out.append((name, problem))
    return out


# ---- paths and files --------------------------------------------------------------------
def cached(desktop: "Desktop", url: str) -> Path:
    """The host file a task may copy in for `url`: the cache's entry, or a file:// path in the cache or
    the task's own folder (never elsewhere: a task file must not copy the host's files into a desktop)."""
    cache = desktop.file_cache
    if url.startswith("file://"):
        local = Path(url[len("file://"):]).resolve()
        roots = [r for r in (cache, desktop.task_dir) if r is not None]
        if not any(local.is_relative_to(r.resolve()) for r in roots):
            raise SetupError(f"{url}: a file:// source must be in the task file cache or the task's own folder "
                             f"({', '.join(map(str, roots)) or 'neither was given'})")
    else:
        index = json.loads((cache / "index.json").read_text()) if cache and (cache / "index.json").exists() else {}
        if url not in index:
            raise SetupError(f"{url} is not in the file cache ({cache or 'none given'}); add it to "
                             f"index.json there — nothing is downloaded at run time")
        local = (cache / index[url]).resolve()
        if not local.is_relative_to(cache.resolve()):
            raise SetupError(f"{url}: the cache's index points outside the cache ({index[url]})")
    if not local.is_file():
        raise SetupError(f"{url}: cached file {local} does not exist")
    return local


def _source(desktop: "Desktop", f: dict) -> str:
    """The URL of a download's file, or an upload's local path as file:// (relative: to the task's folder)."""
    if "url" in f:
        return f["url"]
    local = Path(f["local_path"])
    return "file://" + str(local if local.is_absolute() else (desktop.task_dir or Path.cwd()) / local)


def missing_sources(desktop: "Desktop", steps: list[dict], getters: list[dict]) -> list[str]:
    """Why each file a task copies in (download and upload steps, cloud_file getters) cannot be had;
    empty when all can. Checked at Reset, so a task is refused before an episode is played."""
    urls = [_source(desktop, f) for s in steps if s.get("type") in ("download", "upload_file")
            for f in s.get("parameters", {}).get("files", [])]
    urls += [url for s in steps for url in STEP_FILES.get(s.get("type"), [])]
    for g in getters:
        if g.get("type") in ("cloud_file", "cache_file"):
            urls += g["path"] if isinstance(g.get("path"), list) else [g.get("path")]
    problems = []
    for url in dict.fromkeys(u for u in urls if isinstance(u, str)):
        try:
            cached(desktop, url)
        except SetupError as e:
            problems.append(str(e))
    return problems


def _copy_in(desktop: "Desktop", files: list[dict]) -> None:
    for f in files:
        desktop.sandbox.write(desktop_path(f["path"]), cached(desktop, _source(desktop, f)).read_bytes())


# ---- the steps ---------------------------------------------------------------------------
@step("download", files=(_files("url", "path"), True))
def download(desktop: "Desktop", budget: Budget, files: list[dict], **_) -> None:
    _copy_in(desktop, files)


@step("upload_file", files=(_files("local_path", "path"), True))
def upload_file(desktop: "Desktop", budget: Budget, files: list[dict], **_) -> None:
    _copy_in(desktop, files)


@step("open", path=(check_string, True))
def open_file(desktop: "Desktop", budget: Budget, path: str, **_) -> None:
    target = desktop_path(path)
    if desktop.sandbox.read(target, limit=0) is None:
        raise SetupError(f"open: {path} does not exist on the desktop")
    if Path(target).suffix.lower() not in OFFICE_SUFFIXES:
        raise SetupError(f"open: no application here opens {Path(target).suffix or 'files without a suffix'}")
    desktop.office.open_file(target)


def shell_argv(command: list[str] | str, shell: bool) -> list[str]:
    # /bin/sh, as OSWorld's server runs a shell command (Python's shell=True): under dash, `echo -e`
    # writes its "-e", and a task may count on it (os/cc9d4f34's script then runs as "/bin/sh ./x.sh")
    if flag(shell) or isinstance(command, str):
        return ["sh", "-c", command if isinstance(command, str) else shlex.join(map(str, command))]
    return [str(c) for c in command]


APP_START_S = 30.0
SETUP_WINDOW_S, EVALUATION_WINDOW_S = 15.0, 5.0  # how long a window step waits for its window
PKILL_WAIT_S = 10.0  # how long a task's pkill waits for what it killed
PKILL_ONLY = re.compile(r"-(\d+|[A-Z]+|SIG[A-Z]+|e|-echo|-signal=\S+)")  # signals, --echo: pkill's, not pgrep's
TOLERATED_AFTER_THE_AGENT = {"activate_window", "close_window", "sleep"}  # what the agent may have closed
DESKTOP_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"  # the host's system, as the sandbox mounts it (envs/desktop/sandbox.py)
STAND_INS = {"python", "gnome-terminal", "x-terminal-emulator", "libreoffice", "soffice"}  # the launch step's own
SHELL_WORDS = {"export", "cd", "echo", "source", ".", "set", "unset", "eval", "exec", "true", "false", "test", "[",
               "[[", "if", "then", "else", "elif", "fi", "for", "do", "done", "while", "until", "case", "esac", "in",
               "read", "printf", "pwd", "kill", "wait", "sleep", "{", "}", "!", "function", "return", "exit",
               "history", "alias", "type", "ulimit", "umask", "shift", "trap"}
WRAPPERS = {"sudo", "env", "nohup", "time", "exec", "command", "nice"}  # run the command that follows them
INSTALLERS = {"apt-get", "apt", "pip", "pip3", "snap", "npm"}  # "<one> install" fetches packages
APT = {"apt-get", "apt"}  # whose install of a package the desktop holds succeeds offline (compat/bin/apt-get)


class Run(NamedTuple):
    """A program a command runs; with `packages` when it is an installer's install (which needs the network)."""
    program: str
    packages: tuple[str, ...] | None = None


def missing_program(step: dict) -> str:
    """Why a launch/execute/command step cannot run here: the first program it starts that the desktop
    does not have, or a package install (which needs the network); '' when it can. Every command of a
    shell line counts (`a | sudo -S b && c`, `bash -c "…"`), not only the first. A relative path (a
    script the task brought) is taken as it comes."""
    if step.get("type") not in ("launch", "execute", "command"):
        return ""
    params = step.get("parameters", {})
    command = params.get("command")
    if isinstance(command, list) and not flag(params.get("shell", False)):
        runs = _programs([str(c) for c in command])
    else:
        runs = _shell_programs(_command_text(command))
    for run in runs:
        if run.packages is not None:
            if run.program in APT and all(name in installed_packages() for name in run.packages):
                continue  # compat/bin/apt-get: installing what the desktop holds already succeeds
            return f"'{run.program} install' (needs the network)"
        if not _in_desktop(run.program):
            return f"program {run.program!r} (not in the desktop)"
    return ""


DPKG_GREP = re.compile(r"dpkg\s+-l\s*\|\s*grep\s+['\"]?([\w.+-]+)")  # how a task asks whether a package is installed


def missing_package(getter: dict) -> str:
    """A command getter that asks dpkg for a package the desktop does not have (OSWorld's VM does): the
    answer is already 'not installed', so an 'uninstall it' task would start solved. '' otherwise."""
    command = getter.get("command") if getter.get("type") == "vm_command_line" else None
    wanted = [m.group(1) for m in DPKG_GREP.finditer(_command_text(command))]
    missing = [name for name in wanted if not any(name in package for package in installed_packages())]
    if not missing:
        return ""
    return f"package {missing[0]!r} (in OSWorld's VM, not in the desktop: the task would start solved)"


@functools.cache
def installed_packages() -> frozenset[str]:
    """The names of the Debian packages installed here: the desktop's, whose sandbox mounts /var/lib/dpkg."""
    try:
        status = Path("/var/lib/dpkg/status").read_text(errors="replace")
    except OSError:
        return frozenset()
    return frozenset(m.group(1) for stanza in status.split("\n\n") if "Status: install ok installed" in stanza
                     for m in [re.search(r"^Package: (\S+)", stanza, flags=re.M)] if m)


def _command_text(command: str | list | None) -> str:
    """A step's or getter's command as one shell line (a list joined with the quoting it needs)."""
    return command if isinstance(command, str) else shlex.join(map(str, command or []))


def _shell_programs(text: str) -> list[Run]:
    lex = shlex.shlex(text, posix=True, punctuation_chars="();<>|&\n")
    lex.whitespace, lex.whitespace_split = " \t\r", True
    try:
        tokens = list(lex)
    except ValueError:  # unbalanced quotes: the shell would refuse it too; judge by the first word
        tokens = text.split()[:1]

    def redirection(token: str) -> bool:  # >, >>, 2>&1's >&, &>, <, <<<, and )> as the lexer joins them
        return bool(token) and set(token) <= set("();<>|&\n") and ("<" in token or ">" in token)

    tokens.append(";")
    commands, current, redirected = [], [], False
    for i, token in enumerate(tokens):
        if redirected:  # the file of a redirection, not a command
            redirected = False
        elif token.isdigit() and redirection(tokens[i + 1]):
            pass  # the descriptor of 2>file, 2>&1: not a word, even where a command would start (`(a) 2>&1`)
        elif redirection(token):
            if token[0] in "();|\n":  # `(a)>file`, `a;>file b`: the command ends, then the redirection
                commands.append(current)
                current = []
            redirected = True  # what follows is a file (or, after >&, a descriptor)
        elif token and set(token) <= set("();|&\n"):
            commands.append(current)
            current = []
        else:
            current.append(token)
    return [p for words in commands for p in _programs(words)]


def _programs(words: list[str]) -> list[Run]:
    """The programs one command runs: past `VAR=value`, sudo and its options, env, nohup…; into `bash -c`."""
    while words and ("=" in words[0] and not words[0].startswith("=") or words[0] in WRAPPERS):
        if words[0] == "sudo":
            words = words[1:]
            while words and words[0].startswith("-"):
                words = words[2:] if words[0] in ("-u", "-g") else words[1:]
        else:
            words = words[1:]
    if len(words) > 2 and Path(words[0]).name in ("bash", "sh") and words[1] == "-c":
        return _shell_programs(words[2])
    if len(words) > 1 and Path(words[0]).name in INSTALLERS and "install" in words[1:]:
        packages = tuple(w for w in words[words.index("install") + 1:] if not w.startswith("-"))
        return [Run(Path(words[0]).name, packages)]
    return [Run(words[0])] if words else []


def _in_desktop(name: str) -> bool:
    if name.startswith("$") or name in SHELL_WORDS or name in STAND_INS or Path(name).name in STAND_INS:
        return True
    if "/" not in name and (COMPAT / "bin" / name).exists():  # ours, first on the desktop's PATH: google-chrome, …
        return name not in STAND_IN_NEEDS or Path(STAND_IN_NEEDS[name]).exists()
    if name.startswith("/"):
        return Path(name).exists() and name.startswith(("/usr/", "/bin/", "/sbin/"))
    return "/" in name or shutil.which(name, path=DESKTOP_PATH) is not None  # ./setup.sh: the task's own file


@step("launch", command=(check_command, True), shell=(check_flag, False))
def launch(desktop: "Desktop", budget: Budget, command: list[str] | str, shell: bool = False, **_) -> None:
    from computerrl.envs.desktop.actions import APP_ALIASES, EXTERNAL_APPS, app_window

    raw = command.split() if isinstance(command, str) else [str(c) for c in command]
    office_app = next((a for a in ("calc", "writer", "impress") if f"--{a}" in raw), None)
    if raw and Path(raw[0]).name in ("libreoffice", "soffice") and office_app:  # the desktop's own office
        files = [a for a in raw[1:] if not a.startswith("-")]
        if files:
            desktop.office.open_file(desktop_path(files[0]))
        else:
            desktop.office.open_app(office_app)
        return
    if raw and Path(raw[0]).name in ("gnome-terminal", "xterm", "x-terminal-emulator"):  # OSWorld's terminal
        desktop.launch([*EXTERNAL_APPS["terminal"], *desktop.terminal_log_args()])
        return
    if raw and Path(raw[0]).name == "pkill" and not flag(shell):
        _pkill_and_wait(desktop, budget, raw[1:])
        return
    if raw and not flag(shell) and isinstance(command, list) and raw[0] == f"/usr/bin/{Path(raw[0]).name}" \
            and (COMPAT / "bin" / Path(raw[0]).name).exists():  # /usr/bin/thunderbird: the desktop's stand-in
        command = [Path(raw[0]).name, *raw[1:]]
    desktop.launch(shell_argv(command, shell))
    app = APP_ALIASES.get(Path(raw[0]).name, Path(raw[0]).name) if raw else None
    if app in EXTERNAL_APPS:  # one of the desktop's apps: the next step or the agent's first look expects its window
        if desktop.wait_for_window(lambda w: app_window(w, app), timeout_s=budget.left(APP_START_S)) is None:
            raise SetupError(f"launch: {raw[0]} showed no window within {APP_START_S:.0f} s")
        if app in LAUNCH_SETTLES:
            LAUNCH_SETTLES[app](desktop, budget)


def _pkill_and_wait(desktop: "Desktop", budget: Budget, args: list[str]) -> None:
    """`pkill ARGS`, then the wait for its processes to end. OSWorld's tasks launch `pkill chrome` and then
    Chrome again at once: on their VM the old one is gone by then; here, started together, the new one
    could be the one killed, or hand its window to the dying one."""
    execute(desktop, budget, ["pkill", *args])
    ask = [a for a in args if not PKILL_ONLY.fullmatch(a)]  # what pgrep takes of pkill's options
    deadline = time.monotonic() + budget.left(PKILL_WAIT_S)
    while time.monotonic() < deadline:
        if desktop.sandbox.run(["pgrep", *ask], env=budget.env(desktop), timeout_s=5.0, trusted=budget.trusted).returncode != 0:
            return  # none left (or pgrep refused the pattern: nothing more to wait for)
        time.sleep(0.1)


@step("execute", command=(check_command, True), shell=(check_flag, False))
@step("command", command=(check_command, True), shell=(check_flag, False))
def execute(desktop: "Desktop", budget: Budget, command: list[str] | str, shell: bool = False, **_) -> str:
    """Run to completion in the sandbox, in /home/user; its output is returned (vm_command_line uses it).
    A command that fails is noted for Reset's reply (exit code and the end of stderr)."""
    from computerrl.envs.desktop.sandbox import SandboxError

    argv = shell_argv(command, shell)
    try:
        r = desktop.sandbox.run(argv, env=budget.env(desktop, argv), timeout_s=budget.left(COMMAND_TIMEOUT_S),
                                trusted=budget.trusted)
    except SandboxError as e:
        raise SetupError(f"command {shlex.join(argv)[:200]}: {e}") from None
    if r.returncode != 0:
        desktop.setup_notes.append(f"command {shlex.join(argv)[:200]} exited with code {r.returncode}"
                                   + (f": {r.stderr.strip()[-300:]}" if r.stderr.strip() else ""))
    return r.stdout


@step("sleep", seconds=(_seconds, True))
def sleep(desktop: "Desktop", budget: Budget, seconds: float, **_) -> None:
    time.sleep(budget.left(min(float(seconds), SLEEP_MAX_S)))


# How OSWorld's Ubuntu names an app's windows -> how this desktop's names them (titles end "- Google
# Chrome" there, "- Chromium" here; wmctrl's instance.class "Mail.thunderbird" is class thunderbird-default)
WINDOW_NAMES = {"Google Chrome": "Chromium", "google-chrome": "chromium", "Mail.thunderbird": "thunderbird-default"}


def _window(desktop: "Desktop", budget: Budget, window_name: str, strict: bool = False, by_class: bool = False):
    names = [window_name] + [here for there, here in WINDOW_NAMES.items() if there.lower() == window_name.lower()]

    def matches(w) -> bool:
        name = w.wm_class if flag(by_class) else w.title
        return any(name == n if flag(strict) else n.lower() in name.lower() for n in names)

    # a setup's window may come from a hotkey just pressed, on cores the other desktops share; in an
    # evaluation the window was there (or the agent closed it: then waiting longer only slows the score)
    return desktop.wait_for_window(matches, timeout_s=budget.left(EVALUATION_WINDOW_S if budget.trusted
                                                                  else SETUP_WINDOW_S))


def run_xdotool(desktop: "Desktop", *argv: str) -> None:
    import subprocess

    subprocess.run(["xdotool", *argv], env=desktop.x_env, timeout=10, check=False, capture_output=True)


@step("activate_window", window_name=(check_string, True), strict=(check_flag, False), by_class=(check_flag, False))
def activate_window(desktop: "Desktop", budget: Budget, window_name: str, strict: bool = False,
                    by_class: bool = False, **_) -> None:
    w = _window(desktop, budget, window_name, strict, by_class)
    if w is None:
        raise SetupError(f"activate_window: no window matches {window_name!r}")
    run_xdotool(desktop, "windowactivate", "--sync", str(w.id))


@step("close_window", window_name=(check_string, True), strict=(check_flag, False), by_class=(check_flag, False))
def close_window(desktop: "Desktop", budget: Budget, window_name: str, strict: bool = False,
                 by_class: bool = False, **_) -> None:
    w = _window(desktop, budget, window_name, strict, by_class)
    if w is None:
        raise SetupError(f"close_window: no window matches {window_name!r}")
    run_xdotool(desktop, "windowclose", str(w.id))


def run_steps(desktop: "Desktop", steps: list[dict], budget: Budget, failed: list[str] | None = None) -> None:
    """Run steps in order; the first that fails raises SetupError, unless `failed` collects the failures
    of window steps and sleeps (an evaluation's postconfig: OSWorld logs those and scores). Any other
    step that fails still raises: a postconfig download the agent made fail (a folder it made read-only)
    would leave its own file where the evaluator reads the gold one."""
    for i, s in enumerate(steps):
        try:
            budget.left(1.0)  # a spent budget ends the setup before its next step
            SETUP_STEPS[s["type"]](desktop, budget, **s.get("parameters", {}))
        except TimeoutError:  # a hung office: the desktop's problem, reported as such by the caller
            raise
        except Exception as e:  # noqa: BLE001 - a corrupt file LibreOffice refuses, a sandbox gone, …
            error = e if isinstance(e, SetupError) else SetupError(
                f"setup step {i} ({s['type']}) failed: {type(e).__name__}: {e}")
            if failed is None or s["type"] not in TOLERATED_AFTER_THE_AGENT:
                raise error from None
            failed.append(f"step {i} ({s['type']}): {e}")
