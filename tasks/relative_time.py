"""The `rule_relativeTime` getter: a rule whose expected dates are relative to the day it is scored
("next Monday", "5th next month"), as OSWorld's (`getters/misc.py`) fills them in.

`rules.relativeTime` has `from` (and, for a range, `to`); the day is computed from the desktop's
clock (or `rules.timezone`) and written into `rules.expected` with OSWorld's placeholders ({DoW},
{Month}, {DayD}, {Day0D}, {Year}, {Month0D}, {MonthD}, {month}, {MonthFull}), each replaced once.
Alone, `from` fills `expected.time`; with `to`, it fills `expected.from` and `expected.to` (or, for
the "split" forms, puDay/puMonth/puYear and doDay/doMonth/doYear).

Departure: OSWorld's "first monday four (eight) months later" raises in August (April): its month
arithmetic reaches month 0. Ours gives the first Monday of the month four (eight) months on, always.
"""

from __future__ import annotations

import copy
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from computerrl.tasks.getters import check_any, getter
from computerrl.tasks.setup import Budget, SetupError

if TYPE_CHECKING:
    from computerrl.envs.desktop.desktop import Desktop

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]


def fill(text: str, day: datetime) -> str:
    """OSWorld's placeholders, each replaced once, in its order."""
    for key, value in (("{DoW}", day.strftime("%a")), ("{Month}", day.strftime("%b")), ("{DayD}", str(day.day)),
                       ("{Year}", str(day.year)), ("{Month0D}", f"{day.month:02d}"),
                       ("{month}", MONTHS[day.month - 1].lower()), ("{MonthFull}", MONTHS[day.month - 1]),
                       ("{Day0D}", f"{day.day:02d}"), ("{MonthD}", str(day.month))):
        text = text.replace(key, value, 1)
    return text


def _month_day(now: datetime, months_on: int, day: int) -> datetime:
    total = now.month - 1 + months_on
    return now.replace(year=now.year + total // 12, month=total % 12 + 1, day=day)


def _first_monday(now: datetime, months_on: int) -> datetime:
    first = _month_day(now, months_on, 1)
    return first + timedelta(days=(7 - first.weekday()) % 7)


def start_day(spec: str | int, now: datetime) -> datetime:
    wd = now.weekday()  # Monday 0
    if isinstance(spec, int):
        return now + timedelta(days=spec)
    days = {"tomorrow": 1, "this Saturday": 5 - wd, "next Monday": 7 - wd, "next Monday split": 7 - wd,
            "this month": 0,
            "next Friday": 4 - wd if wd < 4 else 7 if wd == 4 else 7 - wd + 4,
            "next Saturday": 5 - wd if wd < 5 else 7 if wd == 5 else 6,
            "next week Friday": 7 - wd + 4, "next week Saturday": 7 - wd + 5, "next week Sunday": 7 - wd + 6}
    if spec in days:
        return now + timedelta(days=days[spec])
    if spec in ("5th next month", "10th next month", "11th next month"):
        return _month_day(now, 1, int(spec.split("th")[0]))
    if spec == "first monday four months later":
        return _first_monday(now, 4)
    if spec == "first monday eight months later":
        return _first_monday(now, 8)
    raise SetupError(f"rule_relativeTime: unknown relative day {spec!r}")


def end_day(spec: str | int, start: str | int, first: datetime, now: datetime) -> datetime:
    wd = now.weekday()
    if isinstance(spec, int):
        return now + timedelta(days=spec)
    if spec == "this Sunday":
        return now + timedelta(days=6 - wd)
    if spec == "11th next month":
        return _month_day(now, 1, 11)
    if spec in ("next Friday", "next Friday split"):
        if start in ("next Monday", "next Monday split"):
            return first + timedelta(days=4)
        return now + timedelta(days=4 - wd if wd < 4 else 6 - wd + 5)
    if spec == "next Sunday":
        if start in ("next Friday", "next Saturday"):
            return first + timedelta(days=6 - first.weekday())
        return now + timedelta(days=6 - wd if wd < 6 else 7)
    if spec == "next week Sunday":
        if start in ("next week Friday", "next week Saturday"):
            return first + timedelta(days=6 - first.weekday())
        return now + timedelta(days=7 - wd + 6)
    raise SetupError(f"rule_relativeTime: unknown relative end day {spec!r}")


def _now(rules: dict) -> datetime:
    try:
        return datetime.now(ZoneInfo(rules["timezone"])) if rules.get("timezone") else datetime.now().astimezone()
    except (ZoneInfoNotFoundError, ValueError):
        return datetime.now(ZoneInfo("UTC"))  # an unknown zone: UTC, as OSWorld falls back


def resolve(rules: dict, now: datetime) -> dict:
    """The rules with their expected dates filled in (a copy: the task's own stay as written)."""
    rules = copy.deepcopy(rules)
    relative, expected = rules["relativeTime"], rules["expected"]
    first = start_day(relative["from"], now)
    if "to" not in relative:
        times = expected["time"]
        expected["time"] = [fill(t, first) for t in times] if isinstance(times, list) else fill(times, first)
        return rules
    last = end_day(relative["to"], relative["from"], first, now)
    for day, split, keys, plain in ((first, "next Monday split", ("puDay", "puMonth", "puYear"), "from"),
                                    (last, "next Friday split", ("doDay", "doMonth", "doYear"), "to")):
        if relative["from" if plain == "from" else "to"] == split:
            for key in keys:
                expected[key] = fill(expected[key], day)
        else:
            expected[plain] = fill(expected[plain], day)
    return rules


@getter("rule_relativeTime", rules=(check_any, True))
def rule_relative_time(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> dict:
    try:
        return resolve(spec["rules"], _now(spec["rules"]))
    except (KeyError, TypeError, AttributeError) as e:
        raise SetupError(f"rule_relativeTime: malformed rules ({type(e).__name__}: {e})") from None
