"""The API-GUI action space: API classes (`Agent`, `<App>Tools`), their registry, and the parser
that turns a model response into an `Action` without executing anything."""

from computerrl.apis.agent import Agent
from computerrl.apis.parser import Action, InvalidAction, extract_code, parse_action
from computerrl.apis.registry import REGISTRY, ApiFunction, ApiRegistry, Len, Range, Round, register_api

# The application API classes register themselves on import (their UNO code loads only when run).
from computerrl.apis import browser, calc, code, impress, vlc, writer  # noqa: F401

__all__ = [
    "REGISTRY", "Action", "Agent", "ApiFunction", "ApiRegistry", "InvalidAction", "Len", "Range",
    "Round", "extract_code", "parse_action", "register_api",
]
