"""Key and button names as the model (and pyautogui) write them, mapped to what xdotool sends.

Standard library only: the pyautogui stand-in imports it inside a desktop's sandbox, where
nothing of computerrl but this folder is visible.
"""

# pyautogui-style key names (what the model writes) -> X keysyms (what xdotool sends).
KEYSYMS = {
    "ctrl": "ctrl", "control": "ctrl", "alt": "alt", "shift": "shift", "win": "super", "super": "super",
    "cmd": "super", "command": "super", "meta": "super", "enter": "Return", "return": "Return",
    "esc": "Escape", "escape": "Escape", "tab": "Tab", "space": "space", "backspace": "BackSpace",
    "delete": "Delete", "del": "Delete", "insert": "Insert", "home": "Home", "end": "End",
    "pageup": "Prior", "pgup": "Prior", "pagedown": "Next", "pgdn": "Next", "up": "Up", "down": "Down",
    "left": "Left", "right": "Right", "capslock": "Caps_Lock", "printscreen": "Print", "menu": "Menu",
    **{f"f{i}": f"F{i}" for i in range(1, 13)},
}
BUTTONS = {"left": "1", "middle": "2", "right": "3"}


def keysym(key: str) -> str:
    k = key.strip()
    return KEYSYMS.get(k.lower(), k if len(k) > 1 else k.lower() if k.isalpha() else k)
