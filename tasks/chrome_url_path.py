"""Chrome's `url_path_parse` getter, with the semantics of OSWorld's current code (`get_url_path_parse`, an alias
of its `get_macys_product_url_parse`; desktop-env 1.0.2 has neither): the filters a shop encodes in the active
tab's URL path, read as OSWorld's Macy's task reads them.

A filtered listing's path holds one segment of comma-separated filter names followed by one of their values,
`/shop/mens-clothing/shirts/Men_regular_size_t,Price_discount_range/XL,50_PERCENT_%20off%20%26%20more`; a
value may list several choices joined by `|`. The getter gives the flags OSWorld's task checks (each True, or
None when absent), and each of `parse_keys` found among the filters.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from computerrl.tasks.chrome import active_url
from computerrl.tasks.getters import check_any, getter
from computerrl.tasks.setup import Budget

if TYPE_CHECKING:
    from computerrl.envs.desktop.desktop import Desktop

DISCOUNT = "Price_discount_range"
HALF_OFF = "50_PERCENT_ off & more"
SMALLER_DISCOUNTS = ("30_PERCENT_ off & more", "20_PERCENT_ off & more")
SHIRTS = ("shirts", "Shirts", "Shirt")  # values of Product_department that mean shirts
SHORT_SLEEVES = ("short-sleeve", "Short Sleeve")  # values of Sleeve_length that mean short sleeves


def _filters(parts: list[str]) -> dict[str, Any]:
    """The first pair of adjacent comma-separated segments, as {filter name: value} (None when empty; the
    discount as the list of its `|`-separated choices)."""
    for names, values in zip(parts, parts[1:]):
        if "," in names and "," in values:
            found = {}
            for name, value in zip((n.strip() for n in names.split(",")), (v.strip() for v in values.split(","))):
                found[name] = ([c.strip() for c in value.split("|")] if name == DISCOUNT else value) if value else None
            return found
    return {}


def url_path_fields(url: str, parse_keys: list[str]) -> dict[str, Any]:
    path = unquote(urlparse(url).path)
    filters = _filters(path.strip("/").split("/"))
    shirts = "shirts" in path or filters.get("Product_department") in SHIRTS
    short_sleeve = "short-sleeve" in path or filters.get("Sleeve_length") in SHORT_SLEEVES
    filters.setdefault("Men_regular_size_t", None)
    filters.setdefault(DISCOUNT, None)
    fields = {"mens_clothing": True if "mens-clothing" in path else None, "shirts": True if shirts else None,
              "short_sleeve": True if short_sleeve else None}
    for key in parse_keys:
        if key == DISCOUNT:  # only "50 % off and more" alone among the discounts counts
            choices = filters[DISCOUNT] or []
            fields[key] = HALF_OFF if HALF_OFF in choices and not any(d in choices for d in SMALLER_DISCOUNTS) \
                else "not_" + HALF_OFF
        elif key in filters:
            fields[key] = filters[key]
    return fields


def _keys(v) -> str:
    return "" if isinstance(v, list) and all(isinstance(k, str) for k in v) else "expected a list of names"


@getter("url_path_parse", goto_prefix=(check_any, False), parse_keys=(_keys, True))
def url_path_parse(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> dict | None:
    """The active tab's URL path read as filters (None without a browser window)."""
    url = active_url(desktop, spec)
    return None if url is None else url_path_fields(url, spec["parse_keys"])
