"""`BrowserTools` carried out in a desktop: pages through the browser's DevTools, the rest with the
shortcuts a user would press. Runs only in the env server, bound to the desktop whose browser is focused."""

from __future__ import annotations

import json

from computerrl.apis.app_api import ApiError, DesktopApi, implements
from computerrl.apis.kit import AppUnreachable


@implements("BrowserTools")
class BrowserApi(DesktopApi):
    app = "chromium"

    def _page(self, url: str) -> str:
        try:
            devtools = self.desktop.devtools()
            devtools.activate(devtools.open(url)["id"])
        except AppUnreachable as e:
            raise ApiError(f"the browser does not answer: {e}") from None
        return f"Opened {url}"

    def _keys(self, keys: str, what: str) -> str:
        self.desktop.press(keys.split("+"))
        return what

    def open_profile_settings(self) -> str:
        return self._page("chrome://settings/people")

    def open_password_settings(self) -> str:
        return self._page("chrome://settings/autofill")

    def open_privacy_settings(self) -> str:
        return self._page("chrome://settings/privacy")

    def open_appearance_settings(self) -> str:
        return self._page("chrome://settings/appearance")

    def open_search_engine_settings(self) -> str:
        return self._page("chrome://settings/search")

    def open_extensions(self) -> str:
        return self._page("chrome://extensions")

    def open_bookmarks(self) -> str:
        return self._page("chrome://bookmarks")

    def bring_back_last_tab(self) -> str:
        return self._keys("ctrl+shift+t", "Reopened the last closed tab")

    def print(self) -> str:
        return self._keys("ctrl+p", "Opened the print dialog")

    def delete_browsing_data(self) -> str:
        return self._keys("ctrl+shift+Delete", "Opened the dialog that deletes browsing data")

    def bookmark_page(self) -> str:
        return self._keys("ctrl+d", "Opened the bookmark dialog for the current page")

    def app_info(self, max_chars: int) -> str:
        """The open tabs, most recently active first (title and URL), as JSON."""
        try:
            tabs = self.desktop.devtools().tabs()
        except AppUnreachable:
            return ""
        return json.dumps({"tabs": [{"title": t.get("title", ""), "url": t.get("url", "")} for t in tabs]})[:max_chars]
