"""`VLCTools` carried out in a desktop: VLC's HTTP interface (through the keeper, to the VLC that
listens in that desktop) and its settings file (through the keeper, in the desktop's home)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from urllib.parse import quote

from computerrl.apis.app_api import ApiError, DesktopApi, implements
from computerrl.apis.kit import in_home
from computerrl.apis.vlc import MEDIA_SUFFIXES, VLCRC


@implements("VLCTools")
class VlcApi(DesktopApi):
    app = "vlc"

    def _get(self, path: str) -> ET.Element:
        body = self.desktop.vlc(path)
        if body is None:
            raise ApiError("VLC does not answer (is it running?)")
        return ET.fromstring(body)

    def _command(self, command: str, what: str) -> str:
        self._get(f"/requests/status.xml?command={command}")
        return what

    def _status(self) -> ET.Element:
        return self._get("/requests/status.xml")

    def get_playlist(self) -> str:
        playlist = next((n for n in self._get("/requests/playlist.xml").iter("node") if n.get("name") == "Playlist"),
                        None)
        items = [] if playlist is None else [{"name": leaf.get("name"), "uri": leaf.get("uri"),
                                              "duration": f"{leaf.get('duration')}s"} for leaf in playlist.iter("leaf")]
        return json.dumps(items)

    def play(self) -> str:
        return self._command("pl_play", "Playing")

    def pause(self) -> str:
        return self._command("pl_pause", "Paused")

    def next(self) -> str:
        return self._command("pl_next", "Switched to the next item")

    def previous(self) -> str:
        return self._command("pl_previous", "Switched to the previous item")

    def add_to_playlist(self, uri: str) -> str:
        if uri.startswith(("http://", "https://")):
            target = uri
        else:
            try:
                path = in_home(uri.removeprefix("file://"))
            except ValueError:
                raise ApiError(f"uri {uri!r} must be an http(s) URL or a file in the home folder") from None
            target = "file://" + quote(str(path))
        self._get(f"/requests/status.xml?command=in_play&input={quote(target, safe='')}")
        return f"Added {uri} and playing it"

    def get_current_time(self) -> str:
        return f"Current time: {self._status().findtext('time')} seconds"

    def get_media_duration(self) -> str:
        return f"Media duration: {self._status().findtext('length')} seconds"

    def toggle_fullscreen(self, enable: bool | None = None) -> str:
        now = self._status().findtext("fullscreen") in ("1", "true")
        if enable is None or enable != now:  # VLC's own command switches over
            self._get("/requests/status.xml?command=fullscreen")
        return f"Fullscreen {'on' if (not now if enable is None else enable) else 'off'}"

    def _vlcrc(self) -> str:
        data = self.desktop.sandbox.read(VLCRC, limit=4 << 20)
        return "" if data is None else data.decode(errors="replace")

    def get_settings(self) -> str:
        settings = {}
        for line in self._vlcrc().splitlines():
            parts = line.split("=")
            if len(parts) == 2 and not parts[0].startswith("#"):
                settings[parts[0].strip()] = parts[1].strip()
        return json.dumps(settings)

    def set_settings(self, field: str, value: str) -> str:
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", field) or "\n" in value:
            raise ApiError(f"not a VLC option name: {field!r} (like qt-bgcone), or a value on more than one line")
        text, line = self._vlcrc(), f"{field}={value}"
        pattern = re.compile(rf"^#? *{re.escape(field)}=.*$", re.MULTILINE)  # the option's own line, set or not
        text = pattern.sub(lambda _: line, text) if pattern.search(text) else text + ("" if text.endswith("\n") or
                                                                                       not text else "\n") + line + "\n"
        self.desktop.sandbox.write(VLCRC, text.encode())
        return f"Set {field} to {value}"

    def get_media_files(self, path: str, suffix: list[str] | None = None) -> str:
        try:
            folder = in_home(path)
        except ValueError:
            raise ApiError(f"path {path!r} must be in the home folder, like /home/user/Videos") from None
        names = [s.lower().lstrip(".") for s in (MEDIA_SUFFIXES if suffix is None else suffix)]
        found = self.desktop.sandbox.run(["find", str(folder), "-type", "f"], env=self.desktop.env, timeout_s=20)
        return json.dumps(sorted(p for p in found.stdout.splitlines() if p.rsplit(".", 1)[-1].lower() in names))

    def app_info(self, max_chars: int) -> str:
        """What plays: state, file, position and length, volume, fullscreen (from VLC's status)."""
        try:
            status = self._status()
        except ApiError:
            return ""
        info = {"state": status.findtext("state"), "file": next((e.text for e in status.iter("info")
                                                                  if e.get("name") == "filename"), None),
                "time_s": status.findtext("time"), "length_s": status.findtext("length"),
                "volume": status.findtext("volume"), "fullscreen": status.findtext("fullscreen")}
        return json.dumps(info)[:max_chars]
