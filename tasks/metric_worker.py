"""One metric, run out of the env server's process, on files the agent made.

A metric parses what the episode left (an .xlsx whose sheet claims a billion cells, a zip bomb of
a .docx…): run in the server, one hostile file could take its memory or its time, and with them
every desktop it serves. Here it runs in a child with caps on memory and CPU time; a crash or an
overrun is a score of 0 with its reason, never the server's problem.

    echo '{"metric": "exact_match", "result": "a", "expected": {"expected": "a"}, "options": {}}' \\
        | python -m computerrl.tasks.metric_worker           # -> {"score": 1.0}
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from typing import Any

MEMORY_BYTES = 3 << 30  # address space of the child: enough for pandas and any honest document
CPU_S = 60  # CPU seconds of the child


class MetricRaised(ValueError):
    """The metric's own code raised (not a timeout, a kill or too much memory)."""


def score(metric: str, result: Any, expected: Any, options: dict, timeout_s: float) -> float:
    """The metric's score, computed in a capped child; ValueError (with why) when it could not be."""
    request = json.dumps({"metric": metric, "result": result, "expected": expected, "options": options})
    try:
        done = subprocess.run([sys.executable, "-m", "computerrl.tasks.metric_worker"], input=request.encode(),
                              capture_output=True, timeout=timeout_s,
                              env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
    except subprocess.TimeoutExpired:
        raise ValueError(f"ran past {timeout_s:.0f} s") from None
    try:
        reply = json.loads(done.stdout)
    except ValueError:
        why = f"killed by signal {-done.returncode}" if done.returncode < 0 else done.stderr.decode(errors="replace")
        raise ValueError(f"the metric's process died ({why.strip()[-300:]})") from None
    if "error" in reply:
        raise (MetricRaised if reply.get("raised") else ValueError)(reply["error"])
    return float(reply["score"])


def main() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_S, CPU_S))
    from computerrl.tasks import metrics  # noqa: F401 - registers the metrics
    from computerrl.tasks.registry import METRICS

    req = json.load(sys.stdin)
    try:
        reply = {"score": float(METRICS[req["metric"]](req["result"], req["expected"], **(req["options"] or {})))}
    except MemoryError:
        reply = {"error": f"needed more than {MEMORY_BYTES >> 30} GB"}
    except Exception as e:  # noqa: BLE001 - an output the metric cannot read is a wrong output
        reply = {"error": f"{type(e).__name__}: {e}", "raised": True}
    json.dump(reply, sys.stdout)


if __name__ == "__main__":
    main()
