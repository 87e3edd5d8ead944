"""`BrowserTools`: the browser's part of the API-GUI action space (ComputerRL's 11 Chrome APIs).

Names and parameters follow ComputerRL's public `BrowserTools`; the code is ours. The stub is what
the model sees when Chromium is focused; `tools.py` carries the calls out in the desktop, through the
browser's DevTools and its own keyboard shortcuts.
"""

from __future__ import annotations

from computerrl.apis.registry import register_api


@register_api
class BrowserTools:
    @staticmethod
    def open_profile_settings() -> None:
        """Open Chrome's profile settings (chrome://settings/people) in a new tab."""

    @staticmethod
    def open_password_settings() -> None:
        """Open the autofill and passwords settings (chrome://settings/autofill) in a new tab."""

    @staticmethod
    def open_privacy_settings() -> None:
        """Open the privacy and security settings (chrome://settings/privacy) in a new tab."""

    @staticmethod
    def open_appearance_settings() -> None:
        """Open the appearance settings (chrome://settings/appearance: theme, fonts, …) in a new tab."""

    @staticmethod
    def open_search_engine_settings() -> None:
        """Open the search engine settings (chrome://settings/search) in a new tab."""

    @staticmethod
    def bring_back_last_tab() -> None:
        """Reopen the most recently closed tab (ctrl+shift+t)."""

    @staticmethod
    def print() -> None:
        """Open the print dialog for the current page (ctrl+p)."""

    @staticmethod
    def delete_browsing_data() -> None:
        """Open the dialog that deletes browsing data: history, cookies, cache (ctrl+shift+Delete)."""

    @staticmethod
    def open_extensions() -> None:
        """Open the extensions page (chrome://extensions) in a new tab."""

    @staticmethod
    def bookmark_page() -> None:
        """Bookmark the current page (ctrl+d; the bookmark dialog opens)."""

    @staticmethod
    def open_bookmarks() -> None:
        """Open the bookmark manager (chrome://bookmarks) in a new tab."""


from computerrl.apis.browser import tools  # noqa: E402,F401 - registers the implementation
