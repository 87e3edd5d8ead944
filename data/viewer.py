"""One static HTML page for a step dataset: per trajectory, per step the screenshot, the model's
thought, its action, the result and the reward, with filters by task, domain and outcome.

The page needs no server: open it from disk. Screenshots are written beside it as JPEG thumbnails
(`<page>_files/`), so a page of thousands of steps stays light. Everything shown is escaped: model
output is text, never markup.
"""

from __future__ import annotations

import html
import io
import json
import re
from collections import defaultdict
from pathlib import Path

from computerrl.data.files import write_atomic

THUMB_WIDTH = 960  # pixels; a 1920×1080 screenshot is shown at half size
_THINK = re.compile(r"<think>(.*?)(?:</think>|$)", re.DOTALL)

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;background:#f6f6f6;color:#222}
header{position:sticky;top:0;background:#fff;border-bottom:1px solid #ddd;padding:8px 16px;z-index:1}
header select{margin-right:12px} #count{color:#555}
main{padding:8px 16px} details{background:#fff;border:1px solid #ddd;border-radius:6px;margin:8px 0;padding:6px 10px}
summary{cursor:pointer;font-weight:600} .ok{color:#1a7f37} .fail{color:#b42318} .aborted{color:#9a6700}
.step{display:grid;grid-template-columns:480px 1fr;gap:12px;border-top:1px solid #eee;padding:8px 0}
.step img{width:480px;border:1px solid #ccc} pre{white-space:pre-wrap;margin:2px 0;background:#f3f3f3;padding:4px}
.label{color:#666;font-size:12px;text-transform:uppercase}
"""

SCRIPT = """
const sel = {task: document.getElementById('task'), domain: document.getElementById('domain'),
             outcome: document.getElementById('outcome')};
function apply() {
  let shown = 0;
  for (const t of document.querySelectorAll('details.trajectory')) {
    const keep = ['task', 'domain', 'outcome'].every(k => !sel[k].value || t.dataset[k] === sel[k].value);
    t.hidden = !keep; shown += keep;
  }
  document.getElementById('count').textContent = shown + ' of ' + TOTAL + ' trajectories shown';
  const q = new URLSearchParams(); for (const k in sel) if (sel[k].value) q.set(k, sel[k].value);
  history.replaceState(null, '', q.toString() ? '#' + q : '#');
}
const start = new URLSearchParams(location.hash.slice(1));
for (const k in sel) { if (start.get(k)) sel[k].value = start.get(k); sel[k].onchange = apply; }
apply();
"""


def outcome(rows: list[dict]) -> str:
    if any(r["error"] for r in rows):
        return "aborted"
    return "success" if rows and rows[0]["success"] else "failure"


def write_page(ds, out: Path, title: str = "trajectories") -> Path:
    """Write `out` (an .html file) and its thumbnails folder for a step dataset `ds`."""
    out = Path(out)
    files = out.with_name(out.stem + "_files")
    files.mkdir(parents=True, exist_ok=True)
    shots = "screenshot" in ds.column_names
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for k, row in enumerate(ds.remove_columns(["screenshot"]) if shots else ds):
        groups[(row["task_id"], row["group_id"], row["sample"])].append({**row, "_index": k})
    parts, tasks, domains = [], set(), set()
    for (task_id, group_id, sample), rows in groups.items():
        rows.sort(key=lambda r: r["step"])
        kind = outcome(rows)
        tasks.add(task_id)
        domains.add(rows[0]["domain"])
        css = {"success": "ok", "failure": "fail", "aborted": "aborted"}[kind]
        head = (f"{html.escape(task_id)} · sample {sample} · {html.escape(rows[0]['domain'])} · "
                f"<span class={css}>{kind}</span> · {len(rows)} steps · score {rows[0]['score']:g}")
        if rows[0]["error"]:
            head += f" · {html.escape(rows[0]['error'][:200])}"
        steps = [_step(r, ds[r["_index"]]["screenshot"] if shots else None, files) for r in rows]
        parts.append(f'<details class="trajectory"{" open" if not parts else ""} data-task="{html.escape(task_id)}" '
                     f'data-domain="{html.escape(rows[0]["domain"])}" data-outcome="{kind}">'
                     f"<summary>{head}</summary><p>{html.escape(rows[0]['instruction'])}</p>{''.join(steps)}</details>")

    def options(name: str, values) -> str:
        items = "".join(f'<option value="{html.escape(v)}">{html.escape(v)}</option>' for v in sorted(values))
        return f'<label>{name} <select id="{name}"><option value="">all</option>{items}</select></label>'

    page = (f"<!doctype html><html><head><meta charset=utf-8><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><header><b>{html.escape(title)}</b> · "
            f"{options('task', tasks)}{options('domain', domains)}"
            f"{options('outcome', ['success', 'failure', 'aborted'])}<span id=count></span></header>"
            f"<main>{''.join(parts) or '<p>no steps in this dataset</p>'}</main>"
            f"<script>const TOTAL = {len(groups)};{SCRIPT}</script></body></html>")
    write_atomic(out, page)
    return out


def action_code(action_json: str) -> str:
    """The parsed action as a call, e.g. `Agent.click(coordinates=[10, 20], num_clicks=1)`."""
    a = json.loads(action_json)
    return f"{a['api']}.{a['name']}(" + ", ".join(f"{k}={json.dumps(v)}" for k, v in a["args"].items()) + ")"


def _step(row: dict, image, files: Path) -> str:
    thought = _THINK.search(row["response"] or "")
    # A valid step shows the action that ran; an invalid one the answer itself (nothing ran).
    shown = action_code(row["action"]) if row["action"] else (row["response"] or "")[:800]
    img = ""
    if image is not None:
        name = f"{row['_index']:06d}.jpg"
        thumb = image.convert("RGB")
        thumb.thumbnail((THUMB_WIDTH, THUMB_WIDTH))
        buf = io.BytesIO()
        thumb.save(buf, "JPEG", quality=80)
        (files / name).write_bytes(buf.getvalue())
        img = (f'<img src="{html.escape(files.name)}/{name}" alt="screenshot of step {row["step"]}" '
               f"onerror=\"this.replaceWith('screenshot missing')\">")
    verdict = "valid" if row["action_valid"] else "invalid"
    return (f'<div class="step" data-step="{row["step"]}"><div>{img or "<i>no screenshot</i>"}</div><div>'
            f'<div class="label">step {row["step"]} · reward {row["reward"]:g} · {verdict} action</div>'
            f'<div class="label">thought</div><pre>{html.escape(thought.group(1).strip() if thought else "")}</pre>'
            f'<div class="label">{"action" if row["action"] else "answer"}</div><pre>{html.escape(shown)}</pre>'
            f'<div class="label">result</div><pre>{html.escape(row["exec_result"] or "")}</pre></div></div>')
