"""Runs model-written API code inside a desktop's sandbox, against that desktop's office.

    python3 -I -c "<this file's source>"   < request (JSON)

Started by the env server through the sandbox's session (`Desktop.run_generated`), so it runs with
the agent's rights and nothing more, under a time limit; never imported by the toolkit. Debian's
`python3` and `uno` only: the request carries the source of `kit` and `guard`, and the office's pipe,
the app's document factory and UNO service. It checks the code
again (`guard`), connects to the office's UNO pipe, and on the office's main thread (as the env
server's own calls run: see `Office.on_main_thread`) either

- `"mode": "call"`: calls one generated function with `args` on the focused document, or
- `"mode": "test"`: runs each `test_*` function of `tests` on a new document of `app`,

and prints one line, MARK + JSON: {"ok", "result" | "error", "tests": [{"name", "passed", "error"}],
"output"} (what the code printed, cut short).
"""

import contextlib
import functools
import io
import json
import linecache
import sys
import threading
import traceback
import types

MARK = "\x1ecomputerrl-worker "
OUTPUT_CHARS = 2000
TEXT_CHARS = 4000  # an error or result longer than this is cut: the answer must fit the keeper's output


def main() -> None:
    req = json.loads(sys.stdin.read())
    for name, source in req["modules"].items():
        module = types.ModuleType(name)
        exec(compile(source, f"<{name}>", "exec"), module.__dict__)  # our own helpers, sent by the server
        sys.modules[name] = module
    import guard

    if req.get("check", True):
        try:
            guard.check(req["code"] + "\n" + req.get("tests", ""), frozenset(helpers(None, req["app"])))
        except guard.Refused as e:
            return reply({"ok": False, "error": f"refused: {e}"})
    ctx = connect(req["pipe"])
    desktop = ctx.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", ctx)
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        if req["mode"] == "call":
            answer = on_main_thread(ctx, lambda: call(req, desktop, ctx))
        else:
            answer = {"ok": True, "tests": [on_main_thread(ctx, lambda n=n: run_test(req, n, desktop, ctx))
                                            for n in test_names(req["tests"])]}
    reply({**answer, "output": output.getvalue()[-OUTPUT_CHARS:]})


def reply(answer: dict) -> None:
    sys.stdout.write(MARK + json.dumps(answer) + "\n")
    sys.stdout.flush()


def connect(pipe: str):
    import uno

    local = uno.getComponentContext()
    resolver = local.ServiceManager.createInstanceWithContext("com.sun.star.bridge.UnoUrlResolver", local)
    return resolver.resolve(f"uno:pipe,name={pipe};urp;StarOffice.ComponentContext")


def on_main_thread(ctx, fn):
    """`fn()` run while LibreOffice's main thread waits on us (its UNO calls run on that thread)."""
    import unohelper
    from com.sun.star.awt import XCallback

    done, box = threading.Event(), {}

    class Call(unohelper.Base, XCallback):
        def notify(self, _data):
            try:
                box["value"] = fn()
            except BaseException as e:  # noqa: BLE001 - whatever the model's code raised
                box["value"] = {"ok": False, "error": describe(e)}
            finally:
                done.set()

    ctx.ServiceManager.createInstanceWithContext("com.sun.star.awt.AsyncCallback", ctx).addCallback(Call(), None)
    done.wait()  # the server's time limit ends a call that never returns
    return box["value"]


def helpers(doc, app: str) -> dict:
    """The names model-written code finds beside its own (the prompt lists them)."""
    import kit

    names = {"ApiError": kit.ApiError, "parse_color": kit.parse_color, "col_letter": kit.col_letter,
             "col_index": kit.col_index, "parse_range": kit.parse_range, "file_url": kit.file_url,
             "home_path": home_path, "open": home_open, "doc": doc, "save": lambda: doc.store()}
    if app == "calc":
        names.update(sheet=functools.partial(kit.sheet_of, doc), cell_range=functools.partial(kit.range_of, doc),
                     cell=functools.partial(kit.cell_of, doc), used_area=kit.used_area)
    return names


def home_path(path: str) -> str:
    import kit

    try:
        return str(kit.in_home(path))
    except ValueError as e:
        raise kit.ApiError(str(e)) from None


def home_open(path, *args, **kwargs):
    return open(home_path(path), *args, **kwargs)


def namespace(req: dict, doc) -> dict:
    ns = {"__name__": "generated", **helpers(doc, req["app"])}
    run_source(req["code"], "<api>", ns)
    return ns


def run_source(source: str, filename: str, ns: dict) -> None:
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # lines for `describe`
    exec(compile(source, filename, "exec"), ns)


def call(req: dict, desktop, ctx) -> dict:
    import kit

    doc = desktop.getCurrentComponent()
    if doc is None or not doc.supportsService(req["service"]):
        return {"ok": False, "error": f"needs a focused {req['app']} document; open or switch to one first"}
    try:
        result = namespace(req, doc)[req["function"]](**req["args"])
    except kit.ApiError as e:
        return {"ok": False, "error": str(e)[:TEXT_CHARS]}
    return {"ok": True, "result": "Done" if result is None else str(result)[:TEXT_CHARS]}


def test_names(tests: str) -> list[str]:
    import ast

    return [f.name for f in ast.parse(tests).body if isinstance(f, ast.FunctionDef) and f.name.startswith("test")]


def run_test(req: dict, name: str, desktop, ctx) -> dict:
    doc = desktop.loadComponentFromURL(req["factory"], "_blank", 0, ())
    try:
        ns = namespace(req, doc)
        run_source(req["tests"], "<tests>", ns)
        ns[name]()
        return {"name": name, "passed": True, "error": ""}
    except BaseException as e:  # noqa: BLE001
        return {"name": name, "passed": False, "error": describe(e)}
    finally:
        with contextlib.suppress(Exception):
            doc.close(True)


def describe(e: BaseException) -> str:
    """The error as the model should see it: type, message, and the line of its code that raised."""
    where = [f"{f.filename} line {f.lineno}: {f.line or ''}".strip()
             for f in traceback.extract_tb(e.__traceback__) if f.filename in ("<api>", "<tests>")]
    text = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    return (text[:TEXT_CHARS] + (f" (at {where[-1][:300]})" if where else ""))


if __name__ == "__main__":
    main()
