"""`CodeTools` carried out in a desktop with VS Code's own command line, `code`, run in the desktop's
session as the agent would run it in a terminal (envs/desktop/compat/bin/code)."""

from __future__ import annotations

from computerrl.apis.app_api import ApiError, DesktopApi, implements
from computerrl.apis.kit import in_home


@implements("CodeTools")
class CodeApi(DesktopApi):
    app = "code"

    def _code(self, *args: str, opens_window: bool = False) -> str:
        return self.desktop.vscode(list(args), opens_window=opens_window)

    @staticmethod
    def _path(path: str) -> str:
        try:
            return str(in_home(path))
        except ValueError as e:
            raise ApiError(str(e)) from None

    def launch_vscode(self, path: str) -> str:
        self._code("-r", self._path(path), opens_window=True)
        return f"Opened {path} in VS Code"

    def compare_files(self, file1: str, file2: str) -> str:
        self._code("-d", self._path(file1), self._path(file2))
        return f"Comparing {file1} with {file2}"

    def add_folder(self, folder: str) -> str:
        self._code("-a", self._path(folder))
        return f"Added {folder} to the workspace"

    def goto_file(self, file_path: str, line: int = 1, character: int = 1) -> str:
        self._code("-g", f"{self._path(file_path)}:{line}:{character}", opens_window=True)
        return f"Opened {file_path} at line {line}, character {character}"

    def perform_merge(self, path1: str, path2: str, base: str, result: str) -> str:
        self._code("-m", *(self._path(p) for p in (path1, path2, base, result)))
        return f"Merging into {result}"

    def remove_folder(self, folder: str) -> str:
        self._code("--remove", self._path(folder))
        return f"Removed {folder} from the workspace"

    def install_extension(self, extension_id: str, pre_release: bool = False) -> str:
        if pre_release:
            raise ApiError("this desktop's VS Code (code-server) installs releases only, not pre-releases")
        target = self._path(extension_id) if extension_id.endswith(".vsix") else extension_id
        return self._code("--install-extension", target).strip() or f"Installed {extension_id}"

    def uninstall_extension(self, extension_id: str) -> str:
        return self._code("--uninstall-extension", extension_id).strip() or f"Uninstalled {extension_id}"

    def list_extensions(self, show_versions: bool = False, category: str | None = None) -> str:
        args = ["--list-extensions", *(["--show-versions"] if show_versions else []),
                *(["--category", category] if category else [])]
        return self._code(*args).strip() or "No extensions installed"

    def update_extensions(self) -> str:
        installed = self._code("--list-extensions").split()
        for extension in installed:  # installing one again by name takes its latest version
            self._code("--install-extension", extension)
        return f"Updated {len(installed)} extensions" if installed else "No extensions installed"

    def disable_extension(self, extension_id: str) -> str:
        raise ApiError("this desktop's VS Code (code-server) cannot disable an extension from its command line; "
                       "use the Extensions view")

    def toggle_sync(self, state: str) -> str:
        raise ApiError("Settings Sync needs a Microsoft or GitHub account, which this desktop's VS Code "
                       "(code-server) cannot sign in to")
