"""`VLCTools`: VLC's part of the API-GUI action space (ComputerRL's 12 VLC APIs).

Names and parameters follow ComputerRL's public `VLCTools`; the code is ours. The stub is what the
model sees when VLC is focused; `tools.py` carries the calls out through VLC's HTTP interface on the
desktop's loopback and its configuration file, `~/.config/vlc/vlcrc`.
"""

from __future__ import annotations

from typing import Annotated

from computerrl.apis.registry import Len, register_api

MEDIA_SUFFIXES = ["mp4", "avi", "mkv", "mov", "mp3", "m4a", "wav"]
VLCRC = "/home/user/.config/vlc/vlcrc"  # VLC's settings file on Linux, where OSWorld's getter reads it


@register_api
class VLCTools:
    @staticmethod
    def get_playlist() -> str:
        """The playlist's items (name, URI, duration), as JSON."""

    @staticmethod
    def play() -> None:
        """Start playing the current media."""

    @staticmethod
    def pause() -> None:
        """Pause the media that is playing."""

    @staticmethod
    def next() -> None:
        """Switch to the next item of the playlist."""

    @staticmethod
    def previous() -> None:
        """Switch to the previous item of the playlist."""

    @staticmethod
    def add_to_playlist(uri: Annotated[str, Len(1, 2000)]) -> None:
        """Add a media file (a home path or file:// URI) or an http(s) stream to the playlist, and play it."""

    @staticmethod
    def get_current_time() -> str:
        """The playback position of the current media, in seconds."""

    @staticmethod
    def get_media_duration() -> str:
        """The length of the current media, in seconds."""

    @staticmethod
    def toggle_fullscreen(enable: bool | None = None) -> None:
        """Fullscreen on (True), off (False), or switched over (omitted)."""

    @staticmethod
    def get_settings() -> str:
        """VLC's saved settings (the options set in vlcrc), as JSON."""

    @staticmethod
    def set_settings(field: Annotated[str, Len(1, 100)], value: Annotated[str, Len(0, 1000)]) -> None:
        """Set a vlcrc option (input-record-path, qt-bgcone, qt-max-volume, qt-minimal-view, …); read at VLC's next start."""

    @staticmethod
    def get_media_files(path: str, suffix: list[str] = MEDIA_SUFFIXES) -> str:
        """The media files under a folder (recursively) with one of these suffixes, as a JSON list of paths."""


from computerrl.apis.vlc import tools  # noqa: E402,F401 - registers the implementation
