"""The API-GUI action space: API classes (`Agent`, `<App>Tools`), their registry, and the parser
that turns a model response into an `Action` without executing anything."""

from computerrl.apis.agent import Agent
from computerrl.apis.parser import Action, InvalidAction, extract_code, parse_action
from computerrl.apis.registry import REGISTRY, ApiFunction, ApiRegistry, Len, Range, Round, register_api

__all__ = [
    "REGISTRY", "Action", "Agent", "ApiFunction", "ApiRegistry", "InvalidAction", "Len", "Range",
    "Round", "extract_code", "parse_action", "register_api",
]
from computerrl.apis import calc  # noqa: F401  (registers CalcTools)
from computerrl.apis import impress  # noqa: F401  (registers ImpressTools)
from computerrl.apis import writer  # noqa: F401  (registers WriterTools)
