"""The fleet's web console: one server-rendered page of every env server and desktop a `spawn-envs` run
folder lists (status, uptime, restarts, task and step, latencies, steps/s, last error, a live thumbnail),
the work in flight on them, actions (restart a desktop; drain, undrain or remove a server; change how many
there are) and `/metrics` for Prometheus. Starlette (FastAPI's core) under uvicorn; no front-end build:
the page refreshes its fleet table with a few lines of script.

Reading needs no token on a loopback bind; every action does, and so does everything on a wider bind.
The token is given as a cookie (set by the sign-in form), `Authorization: Bearer …` or a form field, and
no page ever shows it.
"""

from __future__ import annotations

import contextlib
import hmac
import html
import os
import secrets
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

from computerrl.envs.fleet import control
from computerrl.envs.fleet.backends.base import is_loopback
from computerrl.envs.service.client import EnvError
from computerrl.envs.fleet.overview import Fleet, FleetView

COOKIE = "computerrl_console"
TOKEN_FILE = "console.token"  # in the run folder, readable by its owner only
LOOK_TTL_S = 1.0  # one look at the fleet serves every request of this second
THUMB_WIDTH, THUMB_EVERY_S = 240, 10


def console_token(envs: Path | str) -> str:
    """The fleet's console token: ENVS/console.token, made on first use, readable by its owner only."""
    path = Path(envs) / TOKEN_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        deadline = time.monotonic() + 5
        while not (token := path.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.05)  # another process made it a moment ago and is writing it
        if not token:
            raise RuntimeError(f"{path} is empty: remove it, and a new token is made") from None
        return token
    token = secrets.token_urlsafe(24)
    with os.fdopen(fd, "w") as f:
        f.write(token)
    return token


def make_app(envs: Path | str, token: str, *, loopback: bool, host: str = "127.0.0.1"):
    """The console's ASGI app. On a `loopback` bind, pages, thumbnails and metrics need no token (and only
    loopback host names are served, against DNS rebinding); actions always need it."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.middleware import Middleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware
    from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
    from starlette.routing import Route

    fleet = Fleet(envs)
    cached: dict = {"view": None, "at": 0.0}
    lock = threading.Lock()
    said: dict[str, str] = {}  # what the latest actions did, by the id their redirect carries

    def look(fresh: bool = False) -> FleetView:
        with lock:
            if fresh or cached["view"] is None or time.monotonic() - cached["at"] > LOOK_TTL_S:
                try:
                    cached["view"], cached["at"] = fleet.look(), time.monotonic()
                except (OSError, ValueError):  # the manifest is being rewritten: the last look stands
                    if cached["view"] is None:
                        raise
            return cached["view"]

    def given_token(request, form: dict | None = None) -> tuple[str, bool]:
        """(the token the request carries, whether it came as the cookie)."""
        if form and form.get("token"):
            return form["token"], False
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:], False
        return request.cookies.get(COOKIE, ""), True

    def signed_in(request, form: dict | None = None) -> bool:
        given, _ = given_token(request, form)
        return bool(given) and hmac.compare_digest(given.encode(), token.encode())

    def may_act(request, form: dict) -> bool:
        """Signed in, and, when by cookie, asked from this console's own pages: a page of another site
        (or of another port of this machine, which SameSite does not tell apart) sends its own Origin."""
        _, by_cookie = given_token(request, form)
        origin = urlsplit(request.headers.get("origin", "")).netloc  # host and port: a TLS proxy changes the scheme
        return signed_in(request, form) and (not by_cookie or origin == request.headers.get("host"))

    def may_read(request) -> bool:
        return loopback or signed_in(request)

    async def form_of(request) -> dict:
        return {k: v[0] for k, v in parse_qs((await request.body()).decode(errors="replace")).items()}

    def page(request):  # plain functions run in a thread: the fleet's RPCs block
        if not may_read(request):
            return RedirectResponse("/login", status_code=303)
        return HTMLResponse(render_page(look(), said.get(request.query_params.get("said", ""), ""),
                                        signed_in(request)))

    def fragment(request):
        if not may_read(request):
            return PlainTextResponse("sign in first", status_code=401)
        return HTMLResponse(render_fleet(look(), signed_in(request)))

    def shot(request):
        if not may_read(request):
            return PlainTextResponse("sign in first", status_code=401)
        env_id, desktop = request.path_params["env_id"], request.path_params["desktop"]
        width = request.query_params.get("w", "0")
        if not width.isdigit():
            return PlainTextResponse("w: a width in pixels", status_code=400)
        try:
            with contextlib.closing(fleet.client(env_id)) as client:
                png = client.screenshot(desktop, max_width=min(int(width), 1 << 16))
        except KeyError:
            return PlainTextResponse(f"no server {env_id}", status_code=404)
        except EnvError as e:
            return PlainTextResponse(str(e), status_code=503)
        return Response(png, media_type="image/png", headers={"Cache-Control": f"max-age={THUMB_EVERY_S}"})

    def metrics(request):
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        if not may_read(request):
            return PlainTextResponse("a bearer token is needed", status_code=401)
        return Response(generate_latest(_registry(look)), media_type=CONTENT_TYPE_LATEST)

    async def login(request):
        if request.method == "GET":
            return HTMLResponse(LOGIN_PAGE)
        form = await form_of(request)
        if not form.get("token") or not signed_in(request, form):
            return HTMLResponse(LOGIN_PAGE.replace("<!--said-->", "<p class=bad>That is not this fleet's token.</p>"),
                                status_code=403)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(COOKIE, form["token"], httponly=True, samesite="strict",
                            secure=request.url.scheme == "https")
        return response

    async def action(request):
        form = await form_of(request)
        if not may_act(request, form):
            return PlainTextResponse("actions need the fleet's console token: sign in at /login", status_code=403)

        def carry_out() -> str:
            try:
                done = act(fleet, look().supervised, form)
            except (KeyError, ValueError, EnvError) as e:
                done = f"not done: {e}"
            look(fresh=True)  # the page shows the change at once
            return done

        key = secrets.token_hex(4)
        said[key] = await run_in_threadpool(carry_out)
        while len(said) > 64:
            said.pop(next(iter(said)))
        return RedirectResponse(f"/?said={key}", status_code=303)

    hosts = sorted({"127.0.0.1", "localhost", "[::1]", "::1", host}) if loopback else ["*"]
    return Starlette(routes=[
        Route("/", page), Route("/fleet", fragment), Route("/shot/{env_id}/{desktop:int}", shot),
        Route("/metrics", metrics), Route("/login", login, methods=["GET", "POST"]),
        Route("/action", action, methods=["POST"])],
        middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=hosts)])


def server(envs: Path | str, *, host: str = "127.0.0.1", port: int = 8765, token: str = "",
           ssl_certfile: str = "", ssl_keyfile: str = ""):
    """A uvicorn server of the console (`.run()` it, or `start()` it beside other work); HTTPS with a
    certificate and key."""
    import uvicorn

    app = make_app(envs, token or console_token(envs), loopback=is_loopback(host), host=host)
    return ConsoleServer(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                        ssl_certfile=ssl_certfile or None, ssl_keyfile=ssl_keyfile or None))


class ConsoleServer:
    def __init__(self, config):
        import uvicorn

        self.config, self.uvicorn = config, uvicorn.Server(config)

    def run(self) -> None:
        self.uvicorn.run()

    def start(self) -> "ConsoleServer":
        """Serve from a thread (spawn-envs --console); returns once it listens."""
        self.thread = threading.Thread(target=self.uvicorn.run, name="console", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.uvicorn.started and self.thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        if not self.uvicorn.started:
            raise RuntimeError(f"the console did not start on {self.config.host}:{self.config.port}")
        return self

    def stop(self) -> None:
        self.uvicorn.should_exit = True
        self.thread.join(timeout=10)


def act(fleet: Fleet, supervised: bool, form: dict) -> str:
    """Carry out one action of the page's forms; says what was done."""
    what, env_id = form.get("action", ""), form.get("env_id", "")
    if what == "restart":
        desktop = int(form.get("desktop", "0"))
        with contextlib.closing(fleet.client(env_id)) as client:
            health = client.rebuild(desktop, "restarted from the console")
        return f"{env_id} desktop {desktop}: " + ("restarted" if health.healthy else f"restart failed: {health.problem}")
    if what not in ("drain", "undrain", "remove", "scale"):
        raise ValueError(f"unknown action {what!r}")
    if not supervised:
        raise ValueError("no supervisor runs for this fleet, and only it can drain, remove or start servers")
    if what == "scale":
        control.send(fleet.envs, "scale", count=int(form.get("count", "0")))
        return f"asked the supervisor for {form.get('count')} servers"
    control.send(fleet.envs, what, env_id=env_id)
    return f"asked the supervisor to {what} {env_id}"


def _registry(look):
    """A Prometheus registry whose one collector reports the fleet as `look` sees it at scrape time."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    class FleetCollector:
        def collect(self):
            view = look()
            server = ["env_id", "host", "backend"]
            desktop = ["env_id", "desktop"]
            up = GaugeMetricFamily("computerrl_server_up", "1 if the env server answers Health", labels=server)
            healthy = GaugeMetricFamily("computerrl_server_healthy", "1 if the supervisor lists it healthy "
                                        "(drained or not)", labels=server)
            uptime = GaugeMetricFamily("computerrl_server_uptime_seconds", "Since the server started", labels=server)
            restarts = CounterMetricFamily("computerrl_server_restarts", "Times the supervisor restarted it",
                                           labels=server)
            d_up = GaugeMetricFamily("computerrl_desktop_healthy", "1 if the desktop is usable", labels=desktop)
            episodes = CounterMetricFamily("computerrl_desktop_episodes", "Resets served", labels=desktop)
            steps = CounterMetricFamily("computerrl_desktop_steps", "Steps served", labels=desktop)
            rebuilt = CounterMetricFamily("computerrl_desktop_replacements", "Times it was rebuilt", labels=desktop)
            resets = CounterMetricFamily("computerrl_desktop_resets", "Resets by how: its pristine spare swapped in "
                                         "(spare), or done in place (in_place)", labels=[*desktop, "how"])
            reset_s = GaugeMetricFamily("computerrl_desktop_reset_seconds", "Its latest Reset", labels=desktop)
            step_s = GaugeMetricFamily("computerrl_desktop_step_seconds", "Its latest Step", labels=desktop)
            rate = GaugeMetricFamily("computerrl_desktop_steps_per_second", "Steps/s since the last look",
                                     labels=desktop)
            for s in view.servers:
                labels = [s.env_id, s.host, s.backend]
                up.add_metric(labels, float(s.uptime_s is not None))
                healthy.add_metric(labels, float(s.status in ("healthy", "drained")))
                uptime.add_metric(labels, s.uptime_s or 0.0)
                restarts.add_metric(labels, s.restarts)
                for d in s.desktops:
                    at = [s.env_id, str(d.index)]
                    d_up.add_metric(at, float(d.healthy))
                    episodes.add_metric(at, d.episodes)
                    steps.add_metric(at, d.steps)
                    rebuilt.add_metric(at, d.replacements)
                    resets.add_metric([*at, "spare"], d.restored)
                    resets.add_metric([*at, "in_place"], d.reset_in_place)
                    reset_s.add_metric(at, d.reset_s)
                    step_s.add_metric(at, d.step_s)
                    rate.add_metric(at, d.steps_per_s)
            work = ["stage", "out"]
            w_total = GaugeMetricFamily("computerrl_work_trajectories", "Trajectories this run plays", labels=work)
            w_played = GaugeMetricFamily("computerrl_work_played", "Trajectories played so far", labels=work)
            w_success = GaugeMetricFamily("computerrl_work_successes", "Successful trajectories so far", labels=work)
            for card in view.work:
                at = [card["stage"], card["out"]]
                w_total.add_metric(at, card["total"])
                w_played.add_metric(at, card["played"])
                w_success.add_metric(at, card["success"])
            yield from (up, healthy, uptime, restarts, d_up, episodes, steps, rebuilt, resets, reset_s, step_s, rate,
                        w_total, w_played, w_success)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector())
    return registry


# ---- the page -----------------------------------------------------------------------------------
def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _seconds(s: float | None) -> str:
    if s is None:
        return "—"
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.1f} h"


def _button(label: str, **fields) -> str:
    """A one-button form posting `fields` to /action; its class is the action, for scripts and tests."""
    hidden = "".join(f'<input type=hidden name="{_e(k)}" value="{_e(v)}">' for k, v in fields.items())
    return f'<form class="{_e(fields["action"])}" method=post action="/action">{hidden}<button>{_e(label)}</button></form>'


def render_fleet(view: FleetView, signed_in: bool) -> str:
    """The live part of the page: work in flight, then one row per desktop."""
    out = ["<h2>Work in flight</h2>"]
    if view.work:
        out.append("<table><tr><th>stage</th><th>output</th><th>done</th><th>left</th><th>success</th>"
                   "<th>steps</th><th>running for</th></tr>")
        for c in view.work:
            out.append(f"<tr class=work><td>{_e(c['stage'])}</td><td>{_e(c['out'])}</td><td>{c['played']:d}</td>"
                       f"<td>{c['total'] - c['played']:d}</td><td>{c['success']:d}/{c['played']:d}</td>"
                       f"<td>{c['steps']:d}</td><td>{_seconds(time.time() - c['started'])}</td></tr>")
        out.append("</table>")
    else:
        out.append("<p>No rollout or eval is using this fleet.</p>")
    out.append("<h2>Desktops</h2><table id=desktops><tr><th>server</th><th>host</th><th>backend</th><th>status</th>"
               "<th>uptime</th><th>restarts</th><th>desktop</th><th>task · step</th><th>reset</th><th>step</th>"
               "<th>steps/s</th><th>last error</th><th>screen</th><th></th></tr>")
    shot_t = int(time.time() // THUMB_EVERY_S)
    for s in view.servers:
        status = "healthy" if s.status == "healthy" else "warn" if s.status in ("starting", "drained") else "bad"
        drain = "undrain" if s.status == "drained" else "drain"
        server_actions = "" if not signed_in else \
            _button(drain, action=drain, env_id=s.env_id) + _button("remove", action="remove", env_id=s.env_id)
        head = (f"<td>{_e(s.env_id)}<br>{server_actions}</td><td>{_e(s.host)}</td><td>{_e(s.backend)}</td>"
                f"<td class={status}>{_e(s.status)}</td><td>{_seconds(s.uptime_s)}</td><td>{s.restarts}</td>")
        if not s.desktops:
            out.append(f"<tr class=server data-env='{_e(s.env_id)}'>{head}<td colspan=8 class=bad>"
                       f"{_e(s.error or 'no desktops')}</td></tr>")
            continue
        for d in s.desktops:
            task = f"{_e(d.task_id)} · {d.step}" if d.task_id else "—"
            if d.task_id and not d.in_episode:
                task += " (over)"
            shot = f"/shot/{quote(s.env_id)}/{d.index}"
            thumb = (f'<a href="{shot}" target=_blank><img alt="screen of {_e(s.env_id)} desktop {d.index}" '
                     f'src="{shot}?w={THUMB_WIDTH}&t={shot_t}" width={THUMB_WIDTH}></a>') if d.healthy else ""
            restart = _button("restart", action="restart", env_id=s.env_id, desktop=d.index) if signed_in else ""
            state = "" if d.healthy else f"<br><span class=bad>{_e(d.problem)}</span>"
            reset = f"{d.reset_s:.2f} s" if d.episodes else "—"
            if d.restored + d.reset_in_place:
                reset += f"<br>{d.restored} of {d.restored + d.reset_in_place} from its spare"
            if d.spare:
                reset += f"<br><span class=warn>{_e(d.spare)}</span>"
            out.append(f"<tr class=desktop data-env='{_e(s.env_id)}' data-desktop={d.index}>{head}<td>{d.index}"
                       f"{state}</td><td>{task}</td><td>{reset}</td>"
                       f"<td>{f'{d.step_s:.2f} s' if d.steps else '—'}</td>"
                       f"<td>{d.steps_per_s:.2f}</td><td class=error>{_e(d.last_error)}</td><td>{thumb}</td>"
                       f"<td>{restart}</td></tr>")
            head = "<td></td>" * 6  # the server's cells once per server
    out.append("</table>")
    return "\n".join(out)


def render_page(view: FleetView, said: str, signed_in: bool) -> str:
    scale = (f'<form method=post action="/action"><input type=hidden name=action value=scale>servers: '
             f'<input name=count type=number min=1 value={len(view.servers)}> <button>set</button></form>'
             if signed_in else '<a href="/login">Sign in</a> with the fleet\'s token to act on it.')
    supervisor = "supervised" if view.supervised else "no supervisor runs: drain, remove and scale are off"
    return f"""<!doctype html><html><head><meta charset=utf-8><title>computerrl fleet · {_e(view.envs)}</title>
<style>{STYLE}</style></head><body>
<h1>computerrl fleet</h1><p>{_e(view.envs)} · {len(view.servers)} servers · {supervisor}</p>
{f'<p class=said>{_e(said)}</p>' if said else ''}<div class=scale>{scale}</div>
<div id=fleet>{render_fleet(view, signed_in)}</div>
<script>
setInterval(async () => {{
  const r = await fetch("/fleet"); if (r.ok) document.getElementById("fleet").innerHTML = await r.text();
}}, 2000);
</script></body></html>"""


STYLE = """body{font:14px system-ui,sans-serif;margin:1em 2em}table{border-collapse:collapse}
td,th{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
.healthy{color:#080}.warn{color:#a60}.bad{color:#b00}.error{max-width:24em;color:#b00;font-size:12px}
.said{background:#eef;padding:4px 8px}form{display:inline;margin:0 2px}img{border:1px solid #ccc}"""

LOGIN_PAGE = f"""<!doctype html><html><head><meta charset=utf-8><title>computerrl fleet · sign in</title>
<style>{STYLE}</style></head><body><h1>computerrl fleet</h1><!--said-->
<form method=post action="/login">The fleet's console token (in its run folder's {TOKEN_FILE}):
<input name=token type=password autocomplete=off autofocus> <button>sign in</button></form></body></html>"""
