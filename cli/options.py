"""A stage's command is made from its config: one option per field, in the field's order, with the
field's type, default, and the help and flags `data.config.setting` gave it. The one wrapper every
stage command shares builds the config and calls the stage; a config that refuses its values (its
`__post_init__` raises ValueError, or KeyError for an unknown name) is a usage error (exit code 2), and
so is an input folder of the wrong kind (`data.folders.WrongInput`: one line, no traceback)."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Annotated, Any, Callable

import typer

from computerrl.data.config import default_of, described
from computerrl.data.folders import WrongInput

REQUIRED = inspect.Parameter.empty  # as a command-line default: the option has none, it must be given


def parameters(config: type, **cli_defaults: Any) -> list[inspect.Parameter]:
    """The fields of `config` as Typer parameters; `cli_defaults` changes a field's default on the
    command line only (REQUIRED: none)."""
    unknown = set(cli_defaults) - {f.name for f in dataclasses.fields(config)}
    if unknown:
        raise TypeError(f"{config.__name__} has no field {', '.join(sorted(unknown))}")
    types = typing.get_type_hints(config)
    params = []
    for field in dataclasses.fields(config):
        about = described(config, field.name)
        cli = dict(about["cli"])
        if cli.pop("argument", False):
            info = typer.Argument(help=about["help"], **cli)
        else:
            info = typer.Option(*about["flags"], help=about["help"], **cli)
        default = cli_defaults.get(field.name, default_of(field))
        params.append(inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=Annotated[types[field.name], info]))
    return params


def stage_command(config: type, run: Callable[[Any], Any], **cli_defaults: Any) -> Callable[..., None]:
    """The Typer command of a stage: its options build `config`, then `run(cfg)`. `cli_defaults`: see
    `parameters` (a stage whose command-line default differs from its config's declares it here)."""
    def command(**options: Any) -> None:
        try:
            cfg = config(**options)
        except WrongInput as e:
            refuse(e)
        except (ValueError, KeyError) as e:  # a KeyError's str() would quote its message
            raise typer.BadParameter(str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)) from None
        try:
            run(cfg)
        except WrongInput as e:
            refuse(e)

    command.__signature__ = inspect.Signature(parameters(config, **cli_defaults))
    command.__qualname__ = command.__name__ = f"{config.__name__}_command"
    command.config, command.cli_defaults = config, cli_defaults  # for the tests: which config, which defaults differ
    return command


def refuse(e: WrongInput) -> None:
    """An input folder of the wrong kind: its one line, and exit code 2 (a usage error), no traceback."""
    typer.echo(f"Error: {e}", err=True)
    raise typer.Exit(2) from None
