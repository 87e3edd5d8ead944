"""`CodeTools`: VS Code's part of the API-GUI action space (ComputerRL's 12 VS Code APIs).

Names and parameters follow ComputerRL's public `CodeTools`; the code is ours. The stub is what the
model sees when VS Code is focused; `tools.py` carries the calls out with VS Code's own command line,
`code`, in the desktop (envs/desktop/compat/bin/code: code-server, VS Code's code, in a Chromium window).
"""

from __future__ import annotations

from typing import Annotated, Literal

from computerrl.apis.registry import Len, Range, register_api

Path = Annotated[str, Len(1, 1000)]
ExtensionId = Annotated[str, Len(3, 200)]


@register_api
class CodeTools:
    @staticmethod
    def launch_vscode(path: Path) -> None:
        """Open a file or folder in VS Code (in its window, if one is open)."""

    @staticmethod
    def compare_files(file1: Path, file2: Path) -> None:
        """Show the differences between two files in VS Code's diff editor."""

    @staticmethod
    def add_folder(folder: Path) -> None:
        """Add a folder to the workspace of the last active VS Code window."""

    @staticmethod
    def goto_file(file_path: Path, line: Annotated[int, Range(1, 10**7)] = 1,
                  character: Annotated[int, Range(1, 10**5)] = 1) -> None:
        """Open a file with the cursor at a line and character."""

    @staticmethod
    def perform_merge(path1: Path, path2: Path, base: Path, result: Path) -> None:
        """A three-way merge: two changed versions of `base`, merged into `result` in VS Code's merge editor."""

    @staticmethod
    def remove_folder(folder: Path) -> None:
        """Remove a folder from the workspace of the last active VS Code window."""

    @staticmethod
    def install_extension(extension_id: ExtensionId, pre_release: bool = False) -> None:
        """Install (or update) an extension, by publisher.name or from a .vsix file in the home folder."""

    @staticmethod
    def uninstall_extension(extension_id: ExtensionId) -> None:
        """Uninstall an extension."""

    @staticmethod
    def list_extensions(show_versions: bool = False, category: Annotated[str, Len(1, 100)] | None = None) -> str:
        """The installed extensions, one publisher.name per line (with @version, show_versions)."""

    @staticmethod
    def update_extensions() -> None:
        """Update every installed extension to its latest version."""

    @staticmethod
    def disable_extension(extension_id: ExtensionId) -> None:
        """Disable an extension for the next start of VS Code."""

    @staticmethod
    def toggle_sync(state: Literal["on", "off"]) -> None:
        """Turn Settings Sync on or off."""


from computerrl.apis.code import tools  # noqa: E402,F401 - registers the implementation
