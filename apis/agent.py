"""`Agent`: the GUI primitives of the API-GUI action space, with ComputerRL's exact signatures.

These are stubs: they declare what the model may call (the registry derives argument checks and
the prompt text from them). The desktop's env server carries the actions out.
"""

from __future__ import annotations

from typing import Annotated, Literal

from computerrl.apis.registry import Len, Range, Round, register_api

Pixel = Annotated[int, Round(), Range(0, None)]
Point = Annotated[list[Pixel], Len(2, 2)]  # [x, y] screen coordinates
Key = Annotated[str, Len(1, None)]
# The arguments of Agent's functions that are screen points (a vision model's frame is mapped onto them)
POINTS = {"click": ("coordinates",), "type": ("coordinates",), "scroll": ("coordinates",),
          "drag_and_drop": ("drag_from_coordinates", "drop_on_coordinates")}
# Typing runs at a few ms per key; longer text belongs in an application API (or several steps).
MAX_TYPED_CHARS = 2000


@register_api
class Agent:
    @staticmethod
    def click(
        coordinates: Point,
        num_clicks: Annotated[int, Range(1, 3)] = 1,
        button_type: Literal["left", "right", "middle"] = "left",
    ) -> None:
        """Click at [x, y] screen coordinates num_clicks (1-3) times with the given button."""

    @staticmethod
    def type(
        coordinates: Point | None = None,
        text: Annotated[str, Len(0, MAX_TYPED_CHARS)] = "",
        overwrite: bool = False,
        enter: bool = False,
    ) -> None:
        """Type text, clicking [x, y] first if given; overwrite clears the field, enter presses Enter after."""

    @staticmethod
    def drag_and_drop(drag_from_coordinates: Point, drop_on_coordinates: Point) -> None:
        """Press the mouse at one [x, y], move to the other [x, y] and release."""

    @staticmethod
    def scroll(coordinates: Point, direction: Literal["up", "down", "left", "right"]) -> None:
        """Scroll the area under [x, y] in a direction."""

    @staticmethod
    def open_app(app_name: str) -> None:
        """Open an application by name, or focus it if it is already open."""

    @staticmethod
    def switch_window(window_id: str | int) -> None:
        """Bring the window with this id (from the window list) to the front."""

    @staticmethod
    def hotkey(keys: Annotated[list[Key], Len(1, 5)]) -> None:
        """Press 1-5 keys together, e.g. ["ctrl", "s"]."""

    @staticmethod
    def quote(content: str) -> None:
        """Record content read from the screen as the answer to the task."""

    @staticmethod
    def wait() -> None:
        """Wait for the screen to settle before the next action."""

    @staticmethod
    def exit(success: bool) -> None:
        """End the task, saying whether it was completed."""


def on_screen(action, frame: tuple[int, int], screen: tuple[int, int]):
    """`action` (a parsed, checked `Action`) with its points moved from a frame of size `frame` (a vision
    model's coordinates: a 0-1000 grid, or pixels of its resized screenshot) onto the screen, clamped to it."""
    import dataclasses

    names = POINTS.get(action.name, ()) if action.api == "Agent" else ()
    args = dict(action.args)
    for name in names:
        if args.get(name) is not None:
            args[name] = [min(size - 1, round(v * size / f)) for v, size, f in zip(args[name], screen, frame)]
    return dataclasses.replace(action, args=args)
