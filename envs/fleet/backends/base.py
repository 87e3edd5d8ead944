"""What every backend offers: start an env server, stop it, tell whether it still runs.

A backend starts *env servers* (`python -m computerrl.envs.service.server`), each hosting one or
more desktops behind a gRPC port. The pool and `spawn-envs` only speak this interface, so a
new backend (a cluster scheduler, say) is one registered class.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Protocol

from computerrl.data.registry import Registry

# The port an env server listens on inside its own network namespace (container).
SERVER_PORT = 50051


def is_loopback(host: str) -> bool:
    """Whether an interface or address is this machine's loopback (a hostname other than localhost: no)."""
    import ipaddress

    try:
        return host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclasses.dataclass
class EnvHandle:
    """One running env server, as the manifest records it."""

    env_id: str  # stable name, e.g. "env-003"; a replacement keeps the id
    address: str  # "host:port" a gRPC client dials
    backend: str  # registry name of the backend that started it
    token: str = ""  # shared secret the server demands ("" = none, loopback only)
    desktops: int = 1  # desktops hosted by this server
    detail: dict[str, Any] = dataclasses.field(default_factory=dict)  # pid / container id / host


class Backend(Protocol):
    name: ClassVar[str]

    def start(self, env_id: str, *, desktops: int = 1) -> EnvHandle:
        """Start one env server and return as soon as its port is known (not yet healthy)."""

    def stop(self, handle: EnvHandle) -> None:
        """Stop the server and every desktop process under it; safe on a dead one."""

    def alive(self, handle: EnvHandle) -> bool:
        """Whether the server's process / container still runs (says nothing of health)."""


BACKENDS = Registry("backend")


def register_backend(name: str):
    """Class decorator: make a backend constructible by name (`--backend NAME`)."""

    def wrap(cls):
        cls.name = name
        return BACKENDS.add(name, cls)

    return wrap


def make_backend(name: str, **options: Any) -> Backend:
    """Build a registered backend; an unknown name lists the known ones."""
    # Importing the modules registers them; docker is cheap to import lazily inside.
    from computerrl.envs.fleet.backends import docker, local  # noqa: F401

    try:
        cls = BACKENDS[name]
    except KeyError as e:
        raise ValueError(str(e)) from None
    return cls(**options)
