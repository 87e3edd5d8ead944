"""The `docker` backend: one container per env server, spread over one or many Docker hosts.

Each container runs the image built from `envs/fleet/Dockerfile`
(`docker build -f envs/fleet/Dockerfile -t computerrl-desktop:latest .`), i.e.
`python -m computerrl.envs.service.server --host 0.0.0.0 --port 50051 --desktops N`, with the
server's shared token passed in the environment (never on the command line, where `ps` and
`docker inspect`'s Args would show it). Port 50051 is published on a random host port.

    backend = make_backend("docker")                                   # local engine
    DOCKER_HOST=tcp://gpu1:2375,tcp://gpu2:2375  ... make_backend("docker", publish_ip="0.0.0.0")
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import secrets
import threading
from typing import Any, Callable
from urllib.parse import urlsplit

from computerrl.envs.fleet.backends.base import SERVER_PORT, EnvHandle, is_loopback, register_backend

log = logging.getLogger("computerrl.envs.fleet.backends.docker")
DEFAULT_IMAGE = "computerrl-desktop:latest"
LOCAL_SOCKET = "unix:///var/run/docker.sock"
CACHE_MOUNT = "/cache"  # where a container sees the task file cache
APIS_MOUNT = "/apis"  # where a container sees a build-apis folder
REMOTE_SCHEMES = ("tcp", "ssh", "http", "https")


class EngineUnreachable(RuntimeError):
    """A Docker engine did not answer (not running, wrong URL, connection lost)."""


def _docker():
    # Imported lazily: `computerrl --help` and the local backend must not need the SDK or an engine.
    import docker

    return docker


def engine_urls(spec: str) -> list[str]:
    """Engine URLs from a comma-separated list ("" = none: $DOCKER_HOST, else the local socket)."""
    return [h.strip() for h in spec.split(",") if h.strip()]


def _is_remote(url: str) -> bool:
    return urlsplit(url).scheme in REMOTE_SCHEMES


@register_backend("docker")
class DockerBackend:
    def __init__(
        self,
        image: str = DEFAULT_IMAGE,  # image holding the env server and the desktop apps
        hosts: list[str] | None = None,  # engine URLs; None = $DOCKER_HOST split on ",", else local
        cpus: float = 1.0,  # CPU cores per container (→ nano_cpus)
        memory_mb: int = 1536,  # RAM cap per container, MiB (→ mem_limit)
        shm_mb: int = 512,  # /dev/shm per container, MiB; LibreOffice crashes on Docker's 64 MiB
        publish_ip: str = "127.0.0.1",  # host interface the server port is published on
        token: str | None = None,  # server secret; None = a random one for this backend
        client_factory: Callable[..., Any] | None = None,  # None = docker.DockerClient
        cache: str | None = None,  # task file cache on the Docker host(s), mounted read-only at /cache
        network: bool = False,  # desktops get outbound network (default: none); needs /dev/net/tun in the container
        apis: str | None = None,  # a build-apis folder on the Docker host(s), mounted read-only at /apis
        server_args: tuple[str, ...] = (),  # more options for each server (e.g. the desktops' limits)
    ):
        if hosts is None:
            hosts = engine_urls(os.environ.get("DOCKER_HOST", ""))
        self.hosts = list(hosts) or [LOCAL_SOCKET]
        if cpus <= 0 or memory_mb <= 0 or shm_mb <= 0:
            raise ValueError("cpus, memory_mb and shm_mb must be positive")
        remote = [h for h in self.hosts if _is_remote(h)]
        if remote and is_loopback(publish_ip):
            # A port published on the remote machine's loopback is unreachable from here.
            raise ValueError(
                f"remote Docker host(s) {', '.join(remote)} with publish_ip={publish_ip!r}: the "
                "server port would only be reachable on that machine's loopback. Pass "
                "publish_ip='0.0.0.0' (or that host's address) so this machine can dial it; "
                "the shared token then guards the port."
            )
        self.image, self.cpus, self.memory_mb, self.shm_mb = image, cpus, memory_mb, shm_mb
        self.publish_ip = publish_ip
        self.token = token if token is not None else secrets.token_urlsafe(32)
        # Names this fleet's containers on every engine (the token is the fleet's; its hash reveals nothing).
        self.fleet = hashlib.sha256(self.token.encode()).hexdigest()[:16]
        self._factory = client_factory
        self.cache, self.network, self.apis, self.server_args = cache, network, apis, tuple(server_args)
        self._clients: dict[str, Any] = {}
        self._image_ok: set[str] = set()  # hosts where the image was seen (checked once per host)
        self._load = {h: 0 for h in self.hosts}  # containers this backend runs, per host
        self._lock = threading.Lock()  # the pool starts and stops from several threads

    def _client(self, url: str):
        with self._lock:
            if url not in self._clients:
                # DockerClient asks the engine its API version on construction: this is the dial.
                self._clients[url] = (self._factory or _docker().DockerClient)(base_url=url)
            return self._clients[url]

    def _place(self, skip: list[str]) -> str | None:
        # Least-loaded host, first in list order on ties: round-robin while all are equal.
        with self._lock:
            left = [h for h in self.hosts if h not in skip]
            if not left:
                return None
            url = min(left, key=lambda h: self._load[h])
            self._load[url] += 1
            return url

    def _release(self, url: str) -> None:
        with self._lock:
            if self._load.get(url, 0) > 0:
                self._load[url] -= 1

    def _address_host(self, url: str) -> str:
        if _is_remote(url):
            return urlsplit(url).hostname or url
        # Dialing 0.0.0.0 happens to work on Linux, but loopback is what it means here.
        return "127.0.0.1" if self.publish_ip in ("0.0.0.0", "::") else self.publish_ip

    def start(self, env_id: str, *, desktops: int = 1) -> EnvHandle:
        """A container on the least-loaded engine; an engine that does not answer is skipped for the next."""
        unreachable: list[str] = []
        while (url := self._place(skip=unreachable)) is not None:
            try:
                return self._start_on(url, env_id, desktops)
            except EngineUnreachable as e:
                unreachable.append(url)
                last = e
        raise RuntimeError(str(last) if len(unreachable) == 1 else
                           f"no Docker engine answered ({', '.join(unreachable)}); the last said: {last}")

    def _start_on(self, url: str, env_id: str, desktops: int) -> EnvHandle:
        errors = _docker().errors
        try:
            client = self._client(url)
            if url not in self._image_ok:
                # Checked once per engine, up front: the error then says how to build the image.
                client.images.get(self.image)
                self._image_ok.add(url)
            safe_id = re.sub(r"[^a-zA-Z0-9_.-]", "-", env_id)  # container names allow only these
            api = client.api  # the SDK's high-level `containers.run` cannot send MaskedPaths (below)
            host_config = api.create_host_config(
                binds={**({self.cache: {"bind": CACHE_MOUNT, "mode": "ro"}} if self.cache else {}),
                       **({self.apis: {"bind": APIS_MOUNT, "mode": "ro"}} if self.apis else {})},
                port_bindings={SERVER_PORT: (self.publish_ip, None)},  # None = a free host port
                # Each desktop is a bubblewrap sandbox inside the container, as with the local backend:
                # it needs user namespaces, which Docker's default seccomp profile forbids, and to mount
                # a fresh /proc, which Docker's masked /proc paths forbid ("Can't mount proc on
                # /newroot/proc"): no masked or read-only paths is what `docker run --security-opt
                # systempaths=unconfined` sends. Nothing else is granted: the server runs as an
                # unprivileged user with no capabilities, and no process in the container may gain
                # privileges (a setuid binary run as root could write the now unmasked /proc/sys).
                security_opt=["seccomp=unconfined", "apparmor=unconfined", "no-new-privileges:true"],
                cap_drop=["ALL"],
                nano_cpus=int(self.cpus * 1e9),
                mem_limit=f"{self.memory_mb}m",
                shm_size=f"{self.shm_mb}m",
                init=True,  # tini reaps the desktops' orphaned children (soffice forks a lot)
                auto_remove=False,  # keep a crashed container around for `docker logs`
            )
            host_config.update(MaskedPaths=[], ReadonlyPaths=[])
            created = api.create_container(
                self.image,
                command=["python", "-m", "computerrl.envs.service.server", "--host", "0.0.0.0",
                         "--port", str(SERVER_PORT), "--desktops", str(desktops),
                         *(["--cache", CACHE_MOUNT] if self.cache else []), *(["--network"] if self.network else []),
                         *(["--apis", APIS_MOUNT] if self.apis else []), *self.server_args],
                name=f"computerrl-{safe_id}-{secrets.token_hex(3)}",
                environment={"COMPUTERRL_ENV_TOKEN": self.token},
                labels={"computerrl.env_id": env_id, "computerrl.role": "env-server", "computerrl.fleet": self.fleet},
                ports=[SERVER_PORT],
                host_config=host_config,
                detach=True,
            )
            try:
                api.start(created["Id"])
            except errors.APIError:
                with contextlib.suppress(errors.APIError):  # created but never ran: leave nothing
                    api.remove_container(created["Id"], force=True)
                raise
            container = client.containers.get(created["Id"])
        except errors.ImageNotFound:
            self._release(url)
            raise RuntimeError(
                f"image {self.image!r} not found on Docker host {url}. Build it from the repo "
                f"root with `docker build -f envs/fleet/Dockerfile -t {self.image} .` (on that host, "
                "or push it to a registry and pull it there)."
            ) from None
        except (errors.DockerException, OSError) as e:  # requests' connection errors are OSErrors
            self._release(url)
            if isinstance(e, errors.APIError):  # the engine answered: its message says it all
                raise
            raise EngineUnreachable(
                f"cannot reach the Docker engine at {url}: {e}. Is dockerd running there, and "
                "are DOCKER_HOST / the hosts option right?"
            ) from e
        # The host port is only assigned once the container started; reload to read it.
        container.reload()
        detail = {"container": container.id, "docker_host": url, "engines": self.hosts}  # all: for sweep()
        ports = container.attrs.get("NetworkSettings", {}).get("Ports") or {}
        bindings = ports.get(f"{SERVER_PORT}/tcp")
        if not bindings:
            try:
                logs = container.logs(tail=20).decode(errors="replace")
            except Exception:  # the logs are a courtesy; the error below is the point
                logs = ""
            self.stop(EnvHandle(env_id, "", "docker", detail=detail))
            raise RuntimeError(
                f"container for {env_id} on {url} exited before publishing its port "
                f"(status {container.status!r}); last log lines:\n{logs}"
            )
        address = f"{self._address_host(url)}:{int(bindings[0]['HostPort'])}"
        return EnvHandle(env_id, address, "docker", self.token, desktops, detail)

    def _container(self, handle: EnvHandle):
        # Handles may come from a manifest written by another process, so look up by id.
        client = self._client(handle.detail["docker_host"])
        return client.containers.get(handle.detail["container"])

    def stop(self, handle: EnvHandle) -> None:
        """Stop and remove its container. One on an engine that no longer answers cannot be: it is
        forgotten (its slot freed), and `spawn-envs --stop` removes it once that engine is back."""
        errors = _docker().errors
        try:
            container = self._container(handle)
            container.stop(timeout=5)  # SIGTERM lets the server close its desktops; then SIGKILL
            container.remove(force=True)
        except errors.NotFound:
            return  # already gone: stopping is idempotent (and its slot was released then)
        except (errors.DockerException, OSError) as e:
            if isinstance(e, errors.APIError):
                raise
            log.warning("%s: its engine %s does not answer (%s); its container is left there",
                        handle.env_id, handle.detail["docker_host"], e)
        self._release(handle.detail["docker_host"])

    def sweep(self) -> int:
        """Remove every container of this fleet still on its engines: those of servers replaced while
        their engine did not answer, once it is back. Returns how many; an engine that does not answer
        is passed over."""
        errors, removed = _docker().errors, 0
        for url in self.hosts:
            try:
                left = self._client(url).containers.list(all=True, filters={"label": f"computerrl.fleet={self.fleet}"})
            except (errors.DockerException, OSError) as e:
                if isinstance(e, errors.APIError):
                    raise
                continue  # that engine does not answer
            for c in left:
                with contextlib.suppress(errors.NotFound):  # gone meanwhile
                    c.remove(force=True)
                    removed += 1
        return removed

    def alive(self, handle: EnvHandle) -> bool:
        """Its container runs (False too when its engine does not answer: the supervisor starts another)."""
        errors = _docker().errors
        try:
            return self._container(handle).status == "running"
        except errors.NotFound:
            return False
        except (errors.DockerException, OSError) as e:
            if isinstance(e, errors.APIError):
                raise
            return False
