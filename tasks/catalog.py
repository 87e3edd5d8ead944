"""Every setup step, getter and metric a task file may name, registered: import this module before reading the
registries (tasks/registry.py). Each part registers its own on import (the app modules their steps and
getters); this one imports them all, so none of them imports the others to fill a registry."""

from computerrl.tasks import (chrome, chrome_url_path, getters, getters_files, metrics,  # noqa: F401
                                   relative_time, setup, vlc)
