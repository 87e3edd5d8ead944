"""Column names and `datasets.Features` of every dataset kind that passes between stages."""

from __future__ import annotations

import datasets

# --- env manifest (spawn-envs output, read by rollout / eval / build-apis) -------------------
MANIFEST_FEATURES = datasets.Features({
    "env_id": datasets.Value("string"),  # stable name; a replacement keeps it
    "address": datasets.Value("string"),  # host:port of the env server
    "backend": datasets.Value("string"),  # "local", "docker", …
    "status": datasets.Value("string"),  # "starting", "healthy", "unhealthy: <why>", "failed: <why>", "stopped"
    "desktops": datasets.Value("int32"),  # desktops hosted by the server
    "token": datasets.Value("string"),  # shared secret every call must carry ("" = none)
    "detail": datasets.Value("string"),  # backend detail as JSON (pid, container id, docker host)
    "restarts": datasets.Value("int32"),  # times the supervisor restarted this env
})
MANIFEST_COLUMNS = list(MANIFEST_FEATURES)


def check_columns(ds: datasets.Dataset, required: list[str], what: str) -> None:
    """Fail early, naming the missing columns, when a stage gets the wrong kind of dataset."""
    missing = [c for c in required if c not in ds.column_names]
    if missing:
        raise ValueError(f"{what} lacks column(s) {', '.join(missing)}; has {', '.join(ds.column_names)}")
