"""One small registry for every "named thing" of the project: backends, metrics, table rules,
getters, setup steps, task templates, app APIs, generation engines, prompt templates.

A `Registry` is a dict that refuses a second entry under the same name and, asked for a name it
lacks, raises `UnknownName` listing the names it has, so a typo on the command line or in a task
file is answered with the choices instead of a bare KeyError.
"""

from __future__ import annotations

from typing import Callable, TypeVar

T = TypeVar("T")


class UnknownName(KeyError):
    """A name nobody registered; the message lists the registered ones."""

    def __str__(self) -> str:  # KeyError's own str() would quote the whole message
        return str(self.args[0])


class Registry(dict):
    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind  # what an entry is, for messages: "metric", "backend", …

    def add(self, name: str, obj: T) -> T:
        if name in self:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self[name] = obj
        return obj

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator form of `add`."""
        return lambda obj: self.add(name, obj)

    def __missing__(self, name: str):
        raise UnknownName(f"unknown {self.kind} {name!r}; known: {', '.join(sorted(self)) or '(none)'}")
