"""The url_path_parse getter's reading of a shop's filter URL (OSWorld's current get_url_path_parse, which
desktop-env 1.0.2 lacks, so the differential test cannot run it): what OSWorld's Macy's task compares."""

from __future__ import annotations

import pytest

from computerrl.tasks.chrome_url_path import url_path_fields
from computerrl.tasks.getters import GETTER_PARAMETERS
from computerrl.tasks.registry import GETTERS, METRICS

SHOP = "https://www.macys.com/shop/mens-clothing/shirts"
KEYS = ["mens_clothing", "shirts", "Men_regular_size_t", "Price_discount_range", "short_sleeve"]
WANTED = {"mens_clothing": True, "shirts": True, "Men_regular_size_t": "XL",
          "Price_discount_range": "50_PERCENT_ off & more", "short_sleeve": True}


@pytest.mark.parametrize("path, changed", [
    ("/Men_regular_size_t,Price_discount_range,Sleeve_length/XL,50_PERCENT_%20off%20%26%20more,Short%20Sleeve"
     "?id=20626", {}),
    ("/Men_regular_size_t,Price_discount_range,Sleeve_length/L,50_PERCENT_%20off%20%26%20more,Short%20Sleeve",
     {"Men_regular_size_t": "L"}),
    ("/Men_regular_size_t,Price_discount_range,Sleeve_length/XL,30_PERCENT_%20off%20%26%20more%7C50_PERCENT_%20off"
     "%20%26%20more,Short%20Sleeve", {"Price_discount_range": "not_50_PERCENT_ off & more"}),
    ("/Men_regular_size_t,Price_discount_range/XL,50_PERCENT_%20off%20%26%20more",
     {"short_sleeve": None}),
    # no comma: no filter segment at all, so neither size nor discount
    ("/Men_regular_size_t/XL", {"Men_regular_size_t": None, "Price_discount_range": "not_50_PERCENT_ off & more",
                                "short_sleeve": None}),
])
def test_filters_in_the_path_give_what_the_task_compares(path, changed):
    fields = url_path_fields(SHOP + path, KEYS)
    assert fields == {**WANTED, **changed}
    assert METRICS["check_direct_json_object"](fields, {"expected": WANTED}) == float(not changed)


def test_flags_from_filter_values_and_from_the_path_as_text():
    fields = url_path_fields("https://www.macys.com/shop/dresses/Product_department,Sleeve_length/Shirts,Short%20Sleeve",
                             ["Product_department"])
    assert fields == {"mens_clothing": None, "shirts": True, "short_sleeve": True, "Product_department": "Shirts"}
    # OSWorld looks for "mens-clothing" anywhere in the path: women's clothing has it too
    assert url_path_fields("https://www.macys.com/shop/womens-clothing", [])["mens_clothing"] is True


def test_registered_with_its_parameters():
    assert "url_path_parse" in GETTERS and set(GETTER_PARAMETERS["url_path_parse"]) == {"goto_prefix", "parse_keys"}
