"""Which of a task's evaluation commands run something the agent can rewrite.

An evaluation's commands run beside the keeper, where nothing the agent left running can touch them,
in an environment nothing in its home hooks into (setup.TRUSTED_ENV). But some of OSWorld's tasks score
by running a file that lives where the agent writes: `bash eval.sh` in its home, a script the task
copied there, the agent's own script (`python ~/Desktop/script.py`), a module the agent was to install
(`python -c "from X import Y"`), or git, which runs the programs the repository's own configuration
names. Such a command runs in the agent's own environment, as on OSWorld's VM (what it checks is that
environment); every other runs in the fixed one. Their output is whatever the agent made that file print (and
a test suite that imports the agent's modules reports a verdict those modules can reach), so
no sandbox can make such a score unforgeable: the score is marked (`Score.agent_code`, the rollout's
`info["agent_code"]`) and `tasks check` lists these tasks apart.
"""

from __future__ import annotations

import ast
import os
import shlex
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from computerrl.tasks.task import Task

INTERPRETERS = {"bash", "sh", "dash", "zsh", "python", "python3", "node", "perl", "ruby", "source", "."}
SEPARATORS = {";", "&&", "||", "|", "&", "then", "do", "else", "(", "$("}
WRITABLE = ("/home/user/", "~/", "$HOME/", "${HOME}/", "/tmp/", "/dev/shm/", "./")  # the agent's, all of them
RUNS_WHAT_ITS_FILES_SAY = {"git": "git runs the programs the repository's own configuration names"}
COMMAND_GETTERS = {"vm_command_line", "vm_command_error"}
# getters whose file a program of the agent's writes: VS Code runs whatever extensions the agent installed,
# and one of them may register the evaluator's command name
AGENT_WRITTEN = {"vscode_config": "VS Code, which runs the agent's extensions, writes the file it reads"}
# metrics whose verdict comes from an interpreter the agent's code runs in: OSWorld's test suite imports the
# agent's modules and calls them, so that code can walk up to the runner's frame and write the verdict itself
# (the jail keeps it from everything else: tasks/metrics/vscode.py)
SHARES_AN_INTERPRETER = {"check_python_file_by_test_suite": "the test suite runs in one interpreter with the "
                                                            "agent's modules, which can reach its verdict"}
SYSTEM_MODULES = {"pyautogui"}  # what the desktop's own python3 has beside its standard library (compat/)


def evaluation_commands(task: "Task") -> list[list[str] | str]:
    """The commands an evaluation runs: postconfig's execute steps and the command getters."""
    steps = [s.get("parameters", {}).get("command") for s in task.evaluator.get("postconfig", [])
             if s.get("type") in ("execute", "command")]
    getters = [g.get("command") for g in task.getters if isinstance(g, dict) and g.get("type") in COMMAND_GETTERS]
    return [c for c in steps + getters if c]


def agent_code(task: "Task") -> list[str]:
    """Why the evaluation's output can be the agent's own (one line per command that runs its files, and per
    getter whose file a program of the agent's writes)."""
    return [f"{_shown(c)}: {why}" for c in evaluation_commands(task) if (why := runs_agent_code(c))] \
        + [f"{g['type']}: {AGENT_WRITTEN[g['type']]}" for g in task.getters
           if isinstance(g, dict) and g.get("type") in AGENT_WRITTEN] \
        + [f"{m}: {SHARES_AN_INTERPRETER[m]}" for m in dict.fromkeys(task.metrics) if m in SHARES_AN_INTERPRETER]


def _shown(command) -> str:
    return (command if isinstance(command, str) else shlex.join(map(str, command)))[:80]


def _words(command) -> list[str]:
    if not isinstance(command, str):
        return [str(w) for w in command]
    try:
        return shlex.split(command.replace("\n", " ; "), comments=True)
    except ValueError:  # an unbalanced quote: the words as they stand
        return command.split()


def _writable(word: str) -> bool:
    """A file the agent can write: under one of its folders, or relative (commands run in its home)."""
    return word.startswith(WRITABLE) or ("/" not in word and os.path.splitext(word)[1] in (".sh", ".py", ".js"))


def _imports_agent_module(code: str) -> str:
    """The first module `python -c CODE` imports that is neither the standard library's nor the system's:
    one the agent installs (OSWorld's "make `from X import Y` work" tasks), so its code runs there."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError):
        return ""
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and not n.level]
    return next((m for m in names if m.split(".")[0] not in sys.stdlib_module_names | SYSTEM_MODULES), "")


def runs_agent_code(command) -> str:
    """Why a command runs code the agent can write ('' when it runs none): such a command runs in the
    agent's own environment, as on OSWorld's VM, since what it checks is that environment."""
    words = _words(command)
    for i, word in enumerate(words):
        starts = i == 0 or words[i - 1] in SEPARATORS or words[i - 1].endswith((";", "&&", "|"))
        program = os.path.basename(word.lstrip("$("))
        if starts and program in RUNS_WHAT_ITS_FILES_SAY:
            return RUNS_WHAT_ITS_FILES_SAY[program]
        if starts and _writable(word):
            return f"it runs {word}, which the agent can rewrite"
        if starts and program in INTERPRETERS:
            rest = words[i + 1:]
            while rest and rest[0].startswith("-") and rest[0] != "-c":
                rest = rest[1:]
            if rest[:1] == ["-c"] and len(rest) > 1:
                module = _imports_agent_module(rest[1]) if program.startswith("python") else ""
                if why := module and f"{program} imports {module}, which the agent installs" \
                        or runs_agent_code(rest[1]):
                    return why
            elif rest and _writable(rest[0]):
                return f"{program} runs {rest[0]}, which the agent can rewrite"
    return ""
