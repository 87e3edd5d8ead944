"""Chrome's metrics and OSWorld's rule metrics, on agreeing and disagreeing inputs (no desktop)."""

from __future__ import annotations

import pytest

from computerrl.tasks.metrics.chrome import (check_direct_json_object, check_enabled_experiments, check_font_size,
                                             check_history_deleted, check_list, compare_urls, is_cookie_deleted,
                                             is_expected_active_tab, is_expected_bookmarks, is_expected_tabs,
                                             is_expected_url_pattern_match, is_in_list, is_shortcut_on_desktop,
                                             literal_match,
                                             normalize_url)


@pytest.mark.parametrize("url, normal", [
    (".amazon.com", "http://amazon"), ("www.amazon.com", "http://amazon"), ("https://www.amazon.co.uk/", "https://amazon"),
    ("smile.amazon.com", "http://smile.amazon"), ("https://www.example.com:8443/a", "https://example/a"),
    ("chrome://newtab/", "chrome://newtab"), ("file:///home/user/x.html", "file:///home/user/x.html")])
def test_urls_are_normalized_as_osworld_does(url, normal):
    assert normalize_url(url) == normal


def test_url_comparison_keeps_scheme_path_and_query():
    assert compare_urls("https://www.lonelyplanet.com", "https://www.lonelyplanet.com/")
    assert not compare_urls("http://example.com", "https://example.com")
    assert not compare_urls("https://example.com/npc/", "https://example.com/npc")
    assert not compare_urls("https://example.com/?q=1", "https://example.com/?q=2")
    assert compare_urls(None, None) and not compare_urls(None, "https://example.com")


def test_expected_tabs_need_as_many_tabs_each_matched():
    rule = {"type": "url", "urls": ["https://www.airbnb.com", "https://www.tripadvisor.com"]}
    tabs = [{"url": "https://www.tripadvisor.com/", "title": ""}, {"url": "https://www.airbnb.com/", "title": ""}]
    assert is_expected_tabs(tabs, rule) == 1.0
    assert is_expected_tabs(tabs + [{"url": "chrome://newtab/", "title": ""}], rule) == 0.0
    assert is_expected_tabs(tabs[:1], rule) == 0.0
    assert is_expected_tabs([], rule) == 0.0


def test_active_tab_and_url_patterns():
    rule = {"type": "url", "url": "chrome://password-manager/passwords"}
    assert is_expected_active_tab("chrome://password-manager/passwords", rule) == 1.0
    assert is_expected_active_tab({"url": "chrome://settings/"}, rule) == 0.0
    assert is_expected_active_tab(None, rule) == 0.0
    rules = {"expected": [r"^https://(www\.)?dmv\.virginia\.gov/licenses-ids/license/applying/eligibility"]}
    assert is_expected_url_pattern_match("https://www.dmv.virginia.gov/licenses-ids/license/applying/eligibility",
                                         rules) == 1.0
    assert is_expected_url_pattern_match({"url": "https://www.dmv.virginia.gov/"}, rules) == 0.0


def test_bookmarks_by_folder_names_and_urls():
    roots = {"bookmark_bar": {"children": [{"type": "folder", "name": "Favorites", "children": []},
                                           {"type": "url", "name": "a", "url": "https://a.org/"}]}}
    assert is_expected_bookmarks(roots, {"type": "bookmark_bar_folders_names", "names": ["Favorites"]}) == 1.0
    assert is_expected_bookmarks(roots, {"type": "bookmark_bar_folders_names", "names": ["Favorite"]}) == 0.0
    assert is_expected_bookmarks(roots, {"type": "bookmark_bar_websites_urls", "urls": ["https://a.org/"]}) == 1.0
    assert is_expected_bookmarks(roots, {"type": "bookmark_bar_websites_urls", "urls": ["https://a.org"]}) == 0.0
    assert is_expected_bookmarks([], {"type": "bookmark_bar_websites_urls", "urls": []}) == 0.0


def test_history_cookies_experiments_and_font_size():
    rows = [["https://www.youtube.com/watch?v=1", "v", 1]]
    assert check_history_deleted(rows, {"type": "keywords", "keywords": ["youtube"]}) == 0.0
    assert check_history_deleted([], {"type": "keywords", "keywords": ["youtube"]}) == 1.0
    cookies = [[0, ".amazon.com", "session"]]
    assert is_cookie_deleted(cookies, {"type": "domains", "domains": [".amazon.com"]}) == 0.0
    assert is_cookie_deleted(cookies, {"type": "domains", "domains": ["smile.amazon.com"]}) == 1.0
    assert check_enabled_experiments(["a@1", "b@2"], {"type": "names", "names": ["a", "b"]}) == 1.0
    assert check_enabled_experiments(["b@2", "a@1"], {"type": "names", "names": ["a", "b"]}) == 0.0  # in order
    assert check_font_size({"default_font_size": 16}, {"type": "range", "min": 16, "max": 99999}) == 0.0  # strict
    assert check_font_size({"default_font_size": 20}, {"type": "range", "min": 16, "max": 99999}) == 1.0
    with pytest.raises(TypeError):  # an unknown rule is the evaluator's problem, not a score
        check_history_deleted(rows, {"type": "urls"})


def test_direct_json_object_equal_or_contained():
    assert check_direct_json_object({"a": "1", "b": ["x"]}, {"expected": {"a": "1", "b": ["x"]}}) == 1.0
    assert check_direct_json_object("{'a': '1'}", {"expected": {"a": "1"}}) == 1.0  # ' read as "
    assert check_direct_json_object({"a": "2"}, {"expected": {"a": "1"}}) == 0.0
    assert check_direct_json_object({"a": "New York City"}, {"expected": {"a": "York"},
                                                             "expect_in_result": True}) == 1.0
    assert check_direct_json_object({"a": ["x", "y"]}, {"expected": {"a": ["z", "y"]}, "expect_in_result": True}) == 1.0
    assert check_direct_json_object({"a": "1"}, {"expected": {"a": "__EVALUATION_FAILED__"}}) == 0.0
    assert check_direct_json_object(None, {"expected": {"a": "1"}}) == 0.0
    with pytest.raises(ValueError):  # not JSON: raised before OSWorld's guard
        check_direct_json_object("{a", {"expected": {"a": "1"}})


def test_list_metrics(tmp_path):
    assert is_in_list(["/home/user/ext"], {"expected": "/home/user/ext"}) == 1.0
    assert is_in_list(["/home/user/ext2"], {"expected": "/home/user/ext"}) == 0.0
    assert literal_match(["A", "b"], ["a", "B"], type="list", ignore_case=True) == 1.0
    assert literal_match(["A"], ["a", "B"], type="list") == 0.0
    f = tmp_path / "out.txt"
    f.write_text("alpha\nbeta\n")
    assert check_list(str(f), {"expect": ["^alpha$"], "unexpect": ["gamma"]}) == 1.0
    assert check_list(str(f), {"expect": ["^alpha$"], "unexpect": ["bet"]}) == 0.0
    assert check_list(None, {"expect": []}) == 0.0


def test_relative_days_are_filled_in_as_osworld_does():
    from datetime import datetime

    from computerrl.tasks.relative_time import resolve

    wednesday = datetime(2026, 11, 25, 9, 30)
    rules = {"relativeTime": {"from": "this Saturday", "to": "this Sunday"},
             "expected": {"from": "{DoW}, {Month} {Day0D}", "to": "{DoW}, {Month} {Day0D}", "city": "NYC"}}
    got = resolve(rules, wednesday)
    assert got["expected"] == {"from": "Sat, Nov 28", "to": "Sun, Nov 29", "city": "NYC"}
    assert rules["expected"]["from"] == "{DoW}, {Month} {Day0D}"  # the task's own rules are left as written
    got = resolve({"relativeTime": {"from": "next Monday", "to": "next Friday"},
                   "expected": {"from": "{DoW}, {DayD} {Month} {Year}, 10:00", "to": "{DayD}"}}, wednesday)
    assert got["expected"] == {"from": "Mon, 30 Nov 2026, 10:00", "to": "4"}
    assert resolve({"relativeTime": {"from": "5th next month"}, "expected": {"time": "{Year}-{Month0D}-{Day0D}"}},
                   datetime(2026, 12, 20))["expected"]["time"] == "2027-01-05"
    assert resolve({"relativeTime": {"from": "tomorrow"}, "expected": {"time": ["{MonthFull} {DayD}"]}},
                   wednesday)["expected"]["time"] == ["November 26"]
    # OSWorld's own code raises here in August: month 0
    assert resolve({"relativeTime": {"from": "first monday four months later"}, "expected": {"time": "{month} {DayD}"}},
                   datetime(2026, 8, 10))["expected"]["time"] == "december 7"


def test_a_shortcut_on_the_desktop_by_name_or_command():
    game = {"chrome-abc-Default.desktop": "[Desktop Entry]\nName=Play Puzzle Game 2048\nExec=chromium --app-id=abc\n"}
    assert is_shortcut_on_desktop(game, {"type": "name", "name": "Play Puzzle Game 2048"}) == 1.0
    assert is_shortcut_on_desktop(game, {"type": "name", "name": "play puzzle game"}) == 1.0  # a part, any case
    assert is_shortcut_on_desktop(game, {"type": "name", "name": "Chess"}) == 0.0
    assert is_shortcut_on_desktop(game, {"type": "exec", "exec": "CHROMIUM"}) == 0.0  # commands keep their case
    assert is_shortcut_on_desktop({"x.desktop": "Name=\n"}, {"type": "name", "name": "Chess"}) == 0.0
