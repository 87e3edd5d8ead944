"""The docker backend against a fake engine: no Docker daemon runs where these tests run.

The fake records what a container is created with (the host config merged in), so the tests assert
what a real engine would be asked to do: image, server argv, limits, port publishing, token placement,
labels, placement. tests/test_docker_backend_real_engine.py runs the backend on real engines.
"""

from __future__ import annotations

import importlib.util
import itertools
import subprocess
import sys

import docker.errors
import pytest

from computerrl.envs.fleet.backends.base import BACKENDS, SERVER_PORT, EnvHandle, make_backend
from computerrl.envs.fleet.backends.docker import DockerBackend

_ports = itertools.count(32768)


class FakeContainer:
    def __init__(self, client, kwargs, publish=True):
        self.client, self.kwargs, self.publish = client, kwargs, publish
        self.id = f"c{next(_ports)}"
        self.status = "created"
        self.attrs = {"NetworkSettings": {"Ports": {}}}
        self.stopped_with = None

    def reload(self):
        # Like the engine: the host port only shows up once the container started.
        self.status = "running" if self.publish else "exited"
        ip = self.kwargs["port_bindings"][SERVER_PORT][0]
        ports = [{"HostIp": ip, "HostPort": str(next(_ports))}] if self.publish else None
        self.attrs = {"NetworkSettings": {"Ports": {f"{SERVER_PORT}/tcp": ports}}}

    def logs(self, tail=None):
        return b"Traceback: server exploded\n"

    def stop(self, timeout=None):
        self.stopped_with = timeout
        self.status = "exited"

    def remove(self, force=False):
        assert force
        del self.client.store[self.id]


class FakeAPI:
    """The SDK's low-level client, as the backend uses it to create and start a container."""

    def __init__(self, client):
        self.client = client

    def create_host_config(self, **kwargs):
        return dict(kwargs)

    def create_container(self, image, host_config, **kwargs):
        run = {"image": image, **kwargs, **host_config}
        self.client.runs.append(run)
        c = FakeContainer(self.client, run, publish=self.client.publish)
        self.client.store[c.id] = c
        return {"Id": c.id}

    def start(self, cid):
        self.client.store[cid].status = "running"


class FakeContainers:
    def __init__(self, client):
        self.client = client

    def list(self, all=False, filters=None):
        key, value = filters["label"].split("=")
        return [c for c in self.client.store.values() if c.kwargs["labels"].get(key) == value]

    def get(self, cid):
        if cid not in self.client.store:
            raise docker.errors.NotFound(f"No such container: {cid}")
        return self.client.store[cid]


class FakeImages:
    def __init__(self, client):
        self.client = client

    def get(self, name):
        if name not in self.client.images_present:
            raise docker.errors.ImageNotFound(f"No such image: {name}")
        return object()


class FakeClient:
    """Stands in for docker.DockerClient(base_url=...); one instance per engine URL."""

    made: dict[str, FakeClient] = {}

    def __init__(self, base_url=None):
        self.base_url = base_url
        self.runs: list[dict] = []
        self.store: dict[str, FakeContainer] = {}
        self.images_present = {"computerrl-desktop:latest", "me/desk:1"}
        self.publish = True
        self.containers = FakeContainers(self)
        self.api = FakeAPI(self)
        self.images = FakeImages(self)
        FakeClient.made[base_url] = self


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    FakeClient.made.clear()
    monkeypatch.delenv("DOCKER_HOST", raising=False)


def test_start_sends_server_argv_limits_and_loopback_publishing():
    backend = DockerBackend(client_factory=FakeClient)
    handle = backend.start("env-003", desktops=4)

    (client,) = FakeClient.made.values()
    assert client.base_url == "unix:///var/run/docker.sock"  # no DOCKER_HOST: local socket
    (run,) = client.runs
    assert run["image"] == "computerrl-desktop:latest"
    assert run["command"] == ["python", "-m", "computerrl.envs.service.server", "--host", "0.0.0.0",
                              "--port", "50051", "--desktops", "4"]
    assert run["nano_cpus"] == 1_000_000_000
    assert run["mem_limit"] == "1536m"
    assert run["shm_size"] == "512m"
    assert run["port_bindings"] == {50051: ("127.0.0.1", None)}  # loopback, random host port
    assert run["labels"] == {"computerrl.env_id": "env-003", "computerrl.role": "env-server",
                             "computerrl.fleet": backend.fleet}
    assert backend.token[:16] not in backend.fleet and len(backend.fleet) == 16  # names the fleet, hides the token
    assert run["detach"] is True and run["init"] is True and run["auto_remove"] is False
    # bubblewrap inside needs user namespaces and a fresh /proc: `--security-opt systempaths=unconfined`
    assert run["security_opt"] == ["seccomp=unconfined", "apparmor=unconfined", "no-new-privileges:true"]
    assert run["cap_drop"] == ["ALL"]
    assert run["MaskedPaths"] == [] and run["ReadonlyPaths"] == []
    assert run["name"].startswith("computerrl-env-003-")

    # The token travels in the environment only: argv shows up in `ps` and `docker inspect`.
    assert run["environment"] == {"COMPUTERRL_ENV_TOKEN": backend.token}
    assert len(backend.token) >= 32
    assert backend.token not in " ".join(run["command"])

    container = client.store[handle.detail["container"]]
    host_port = container.attrs["NetworkSettings"]["Ports"]["50051/tcp"][0]["HostPort"]
    assert handle == EnvHandle(
        "env-003", address=f"127.0.0.1:{host_port}", backend="docker", token=backend.token,
        desktops=4, detail={"container": container.id, "docker_host": client.base_url, "engines": [client.base_url]},
    )


def test_options_reach_the_engine():
    backend = DockerBackend(image="me/desk:1", cpus=2.5, memory_mb=4096, shm_mb=1024,
                            token="s3cret", client_factory=FakeClient)
    handle = backend.start("env-000")
    (run,) = FakeClient.made["unix:///var/run/docker.sock"].runs
    assert run["image"] == "me/desk:1"
    assert run["nano_cpus"] == 2_500_000_000
    assert (run["mem_limit"], run["shm_size"]) == ("4096m", "1024m")
    assert run["environment"]["COMPUTERRL_ENV_TOKEN"] == handle.token == "s3cret"
    assert run["command"][-2:] == ["--desktops", "1"]


def test_a_cache_and_an_apis_folder_are_mounted_read_only_and_named_to_the_server():
    backend = DockerBackend(cache="/srv/cache", apis="/srv/apis-calc", client_factory=FakeClient)
    backend.start("env-000")
    (run,) = FakeClient.made["unix:///var/run/docker.sock"].runs
    assert run["command"][-4:] == ["--cache", "/cache", "--apis", "/apis"]
    assert run["binds"] == {"/srv/cache": {"bind": "/cache", "mode": "ro"},
                              "/srv/apis-calc": {"bind": "/apis", "mode": "ro"}}


def test_each_backend_gets_its_own_random_token():
    one, two = DockerBackend(client_factory=FakeClient), DockerBackend(client_factory=FakeClient)
    assert one.token != two.token


def test_round_robin_over_docker_hosts(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "tcp://a:2375,tcp://b:2375")
    backend = DockerBackend(publish_ip="0.0.0.0", client_factory=FakeClient)
    handles = [backend.start(f"env-{i:03d}") for i in range(4)]

    assert [h.detail["docker_host"] for h in handles] == ["tcp://a:2375", "tcp://b:2375"] * 2
    # The address is the remote engine's hostname: that is where the port is published.
    assert [h.address.split(":")[0] for h in handles] == ["a", "b", "a", "b"]
    assert FakeClient.made["tcp://a:2375"].runs[0]["port_bindings"] == {50051: ("0.0.0.0", None)}

    # Least-loaded: freeing a slot on b sends the next container there, not to a.
    backend.stop(handles[1])
    assert backend.start("env-004").detail["docker_host"] == "tcp://b:2375"


def test_remote_host_with_loopback_publishing_is_refused():
    with pytest.raises(ValueError, match="publish_ip='0.0.0.0'") as err:
        DockerBackend(hosts=["tcp://gpu1:2375"], client_factory=FakeClient)
    assert "tcp://gpu1:2375" in str(err.value)


def test_stop_removes_and_is_safe_on_a_gone_container():
    backend = DockerBackend(client_factory=FakeClient)
    handle = backend.start("env-001")
    client = FakeClient.made["unix:///var/run/docker.sock"]
    container = client.store[handle.detail["container"]]

    backend.stop(handle)
    assert container.stopped_with == 5
    assert handle.detail["container"] not in client.store
    backend.stop(handle)  # already removed: no error


def test_alive_follows_container_status():
    backend = DockerBackend(client_factory=FakeClient)
    handle = backend.start("env-001")
    client = FakeClient.made["unix:///var/run/docker.sock"]
    assert backend.alive(handle) is True
    client.store[handle.detail["container"]].status = "exited"  # the server crashed
    assert backend.alive(handle) is False
    backend.stop(handle)
    assert backend.alive(handle) is False  # not found


def test_missing_image_says_how_to_build_it():
    class NoImage(FakeClient):
        def __init__(self, base_url=None):
            super().__init__(base_url)
            self.images_present = set()

    backend = DockerBackend(client_factory=NoImage)
    with pytest.raises(RuntimeError) as err:
        backend.start("env-001")
    assert "docker build -f envs/fleet/Dockerfile -t computerrl-desktop:latest ." in str(err.value)
    assert FakeClient.made["unix:///var/run/docker.sock"].runs == []


def test_unreachable_engine_names_the_host():
    def refuse(base_url=None):
        raise docker.errors.DockerException("Error while fetching server API version")

    backend = DockerBackend(hosts=["tcp://nowhere:2375"], publish_ip="0.0.0.0",
                            client_factory=refuse)
    with pytest.raises(RuntimeError, match="tcp://nowhere:2375"):
        backend.start("env-001")


def test_engine_lost_mid_start_names_the_host(monkeypatch):
    import requests

    def lost(self, image, host_config, **kwargs):
        raise requests.exceptions.ConnectionError("Connection aborted")

    monkeypatch.setattr(FakeAPI, "create_container", lost)
    backend = DockerBackend(client_factory=FakeClient)
    with pytest.raises(RuntimeError, match="unix:///var/run/docker.sock"):
        backend.start("env-001")


def test_container_that_dies_before_publishing_is_cleaned_up():
    class Crashing(FakeClient):
        def __init__(self, base_url=None):
            super().__init__(base_url)
            self.publish = False

    backend = DockerBackend(client_factory=Crashing)
    with pytest.raises(RuntimeError, match="server exploded"):
        backend.start("env-001")
    assert FakeClient.made["unix:///var/run/docker.sock"].store == {}


def test_importing_the_backend_does_not_import_the_docker_sdk():
    code = ("import sys, computerrl.envs.fleet.backends.docker as m; "
            "assert 'docker' not in sys.modules, 'docker SDK imported eagerly'")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.skipif(
    importlib.util.find_spec("computerrl.envs.fleet.backends.local") is None,
    reason="make_backend imports the local backend (envs/fleet/backends/local.py), not written yet",
)
def test_make_backend_builds_the_docker_backend():
    backend = make_backend("docker", client_factory=FakeClient)
    assert isinstance(backend, DockerBackend) and BACKENDS["docker"] is DockerBackend
    assert backend.start("env-007").backend == "docker"


def test_an_engine_that_does_not_answer_is_skipped_for_the_next(monkeypatch):
    """Two engines stand for two hosts: with one down, new servers start on the other; the servers of
    the lost one read as dead (so the supervisor replaces them) and stopping them does not fail."""
    import requests

    down: set[str] = set()

    class Flaky(FakeClient):
        def __init__(self, base_url=None):
            if base_url in down:
                raise docker.errors.DockerException("Error while fetching server API version")
            super().__init__(base_url)

    backend = DockerBackend(hosts=["unix:///a.sock", "unix:///b.sock"], client_factory=Flaky)
    first = backend.start("env-000")
    assert first.detail["docker_host"] == "unix:///a.sock"

    def lost(self, cid):
        raise requests.exceptions.ConnectionError("Connection refused")

    found = FakeContainers.get
    monkeypatch.setattr(FakeContainers, "get", lost)  # engine a is gone, with its containers
    assert not backend.alive(first)
    backend.stop(first)  # logged, not raised
    monkeypatch.setattr(FakeContainers, "get", found)
    down.add("unix:///a.sock")
    backend._clients.pop("unix:///a.sock")  # a fresh dial, as after the engine went away
    again = [backend.start(f"env-00{i}") for i in range(2)]
    assert [h.detail["docker_host"] for h in again] == ["unix:///b.sock"] * 2
    down.add("unix:///b.sock")
    backend._clients.pop("unix:///b.sock")
    with pytest.raises(RuntimeError, match="no Docker engine answered .*a.sock.*b.sock"):
        backend.start("env-009")
