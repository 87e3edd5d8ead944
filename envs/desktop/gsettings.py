"""GNOME's settings as OSWorld's VM holds them before a task, where Debian's defaults differ: a task that
asks the agent to turn a setting on would otherwise start solved.

The desktop's apps and `gsettings` read the schemas compiled here (GSETTINGS_SCHEMA_DIR) with these
values as their defaults; what the agent sets goes to its own dconf database, emptied at each reset.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

SYSTEM_SCHEMAS = Path("/usr/share/glib-2.0/schemas")
OSWORLD_DEFAULTS = {  # schema: {key: value as GVariant text}
    "org.gnome.desktop.screensaver": {"lock-enabled": "false"},  # the VM never locks (os/a4d98375: "lock it")
}


def compile_schemas(into: Path) -> None:
    """Debian's schemas and their overrides, then OSWORLD_DEFAULTS, compiled into `into`."""
    into.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gsettings-") as tmp:
        for source in [*SYSTEM_SCHEMAS.glob("*.xml"), *SYSTEM_SCHEMAS.glob("*.override")]:
            (Path(tmp) / source.name).symlink_to(source)
        (Path(tmp) / "99_osworld.gschema.override").write_text("".join(
            f"[{schema}]\n" + "".join(f"{key}={value}\n" for key, value in keys.items()) + "\n"
            for schema, keys in OSWORLD_DEFAULTS.items()))
        subprocess.run(["glib-compile-schemas", f"--targetdir={into}", tmp], check=True, capture_output=True,
                       timeout=60)
