"""The env manifest: which env servers exist, where, and how they are doing."""

from __future__ import annotations

import json
from pathlib import Path

import datasets

from computerrl.data.datasets_io import load, save_atomic
from computerrl.data.schemas import MANIFEST_COLUMNS, MANIFEST_FEATURES, check_columns
from computerrl.envs.fleet.backends.base import EnvHandle

MANIFEST_DIR = "manifest"
# a server's status in the manifest, as its supervisor sets it (and the pool reads it)
HEALTHY = "healthy"
DRAINED = "drained"  # healthy, but no new episode goes to it (the pool leases only healthy servers)
REMOVED = "removed"  # stopped and gone from the fleet: a pool that had it retires it


def manifest_path(run_dir: Path | str) -> Path:
    """A run folder's manifest; a path that already is a manifest dataset is taken as it is."""
    p = Path(run_dir)
    return p if (p / "dataset_info.json").exists() else p / MANIFEST_DIR


def write_manifest(run_dir: Path | str, handles: list[EnvHandle], status: dict[str, str],
                   restarts: dict[str, int] | None = None, lineage: dict | None = None) -> Path:
    rows = [{"env_id": h.env_id, "address": h.address, "backend": h.backend, "status": status.get(h.env_id, ""),
             "desktops": h.desktops, "token": h.token, "detail": json.dumps(h.detail),
             "restarts": (restarts or {}).get(h.env_id, 0)} for h in handles]
    ds = datasets.Dataset.from_list(rows, features=MANIFEST_FEATURES) if rows else \
        datasets.Dataset.from_dict({c: [] for c in MANIFEST_COLUMNS}, features=MANIFEST_FEATURES)
    # The manifest holds the servers' tokens: its folder is readable by its owner only (0o700).
    return save_atomic(ds, Path(run_dir) / MANIFEST_DIR, lineage=lineage, mode=0o700)


def read_manifest(run_dir: Path | str) -> tuple[list[EnvHandle], dict[str, str]]:
    """(handles, status by env id) from a run folder or a manifest dataset."""
    rows = manifest_rows(run_dir)
    return [handle_of(r) for r in rows], {r["env_id"]: r["status"] for r in rows}


def manifest_rows(run_dir: Path | str) -> list[dict]:
    ds = load(manifest_path(run_dir))
    check_columns(ds, MANIFEST_COLUMNS, f"env manifest {manifest_path(run_dir)}")
    return ds.to_list()


def handle_of(row: dict) -> EnvHandle:
    return EnvHandle(env_id=row["env_id"], address=row["address"], backend=row["backend"], token=row["token"],
                     desktops=row["desktops"], detail=json.loads(row["detail"] or "{}"))


def fleet_cache(run_dir: Path | str) -> Path | None:
    """The file cache (`spawn-envs --cache`) the fleet's desktops read task files from, as its lineage says."""
    from computerrl.data.datasets_io import LINEAGE_FILE

    card = manifest_path(run_dir) / LINEAGE_FILE
    cache = json.loads(card.read_text()).get("options", {}).get("cache") if card.exists() else None
    return Path(cache).resolve() if cache else None
