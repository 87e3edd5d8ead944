"""Vision benchmark: what screenshots cost a policy on this machine.

    python -m computerrl.bench.bench_vision                      # 1 and 4 desktops (~22 min on 2 cores)
    python -m computerrl.bench.bench_vision --desktops 1 --steps 6

- Prompt tokens per screenshot: a real desktop's screenshot (1920x1080) through each family's processor at
  several image budgets: Qwen2.5-VL's max_pixels (one token per 28x28 pixels of the resized image) and
  Idefics3/SmolVLM's image size (no splitting: (size / 16)² / 4 tokens, plus 3).
- Rollout steps/s, text only against with screenshots, at each number of desktops: the embedded SmolLM2
  (accessibility tree, as the demo plays) against Idefics3 whose language model is the same SmolLM2 with
  a random vision tower (`bench/vision_models.py`, image size `--image-size`), each screenshot and the one
  before it in the prompt (`--screens`), on generated Calc tasks in real desktops; the demo's budgets
  and answer cap. Also the PNG bytes a step's screenshot costs in the step dataset.
Prints the figures, then one flat JSON line of results.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
from pathlib import Path


def tokens_per_screenshot(png: bytes) -> dict:
    """Image tokens one screenshot costs, per family and budget (processors only, no model)."""
    from transformers import AutoTokenizer, Idefics3Processor
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    from computerrl.policy.vision import as_image

    image, out = as_image(png), {}
    for budget in (64, 256, 1024):  # max_pixels = budget x 28 x 28
        grid = Qwen2VLImageProcessorPil(max_pixels=budget * 28 * 28)(images=[image], return_tensors="pt")["image_grid_thw"]
        out[f"qwen_max_pixels_{budget}x784"] = int(grid.prod()) // 4
    from computerrl.policy.checkpoint import embedded_checkpoint

    tokenizer = AutoTokenizer.from_pretrained(str(embedded_checkpoint()))
    tokenizer.add_special_tokens({"additional_special_tokens": ["<global-img>"]})
    for size in (128, 256, 512):
        processor = Idefics3Processor(Idefics3ImageProcessorPil(do_image_splitting=False, size={"longest_edge": size},
                                                                max_image_size={"longest_edge": size}),
                                      tokenizer, image_seq_len=(size // 16) ** 2 // 4)
        ids = processor(text=["<image>"], images=[[image]])["input_ids"][0]
        out[f"idefics3_image_size_{size}"] = len(ids)
    return out


def main() -> None:
    from computerrl.bench.bench_rollout import calc_desktops, episodes
    from computerrl.bench.vision_models import smolvlm
    from computerrl.envs.fleet.pool import EnvPool
    from computerrl.policy.agent import ModelPolicy
    from computerrl.policy.checkpoint import embedded_checkpoint
    from computerrl.policy.prompt import BUDGETS
    from computerrl.policy.session import open_engine
    from computerrl.stages.presets import schedule

    demo = schedule("demo")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--desktops", default="1,4", help="comma-separated desktop counts")
    ap.add_argument("--steps", type=int, default=12, help="steps per measured run")
    ap.add_argument("--max-steps", type=int, default=3, help="steps per episode")
    ap.add_argument("--image-size", type=int, default=512, help="Idefics3's image size: (size/16)²/4 tokens a screenshot")
    ap.add_argument("--screens", type=int, default=2, help="screenshots a prompt holds")
    ap.add_argument("--max-new-tokens", type=int, default=demo.play["max_new_tokens"], help="answer cap (the demo's)")
    ap.add_argument("--budgets", default=demo.play["budgets"], help="prompt budgets (the demo's)")
    ap.add_argument("--model", type=Path, default=None, help="the text model, and the vision model's text half "
                                                             "(default: the embedded SmolLM2)")
    args = ap.parse_args()
    counts = [int(c) for c in args.desktops.split(",")]
    results: dict = {"image_size": args.image_size, "screens": args.screens, "budgets": args.budgets,
                     "max_new_tokens": args.max_new_tokens}
    with tempfile.TemporaryDirectory(prefix="bench-vision-") as tmp, \
            calc_desktops(Path(tmp), max(counts)) as (tasks, handles):
        print("building the vision model (SmolLM2's weights, a random vision tower) …", flush=True)
        text = args.model or embedded_checkpoint()
        models = {"text": text, "vision": smolvlm(Path(tmp) / "smolvlm", image_size=args.image_size, base=text)}
        shot = EnvPool(handles[:1]).clients[handles[0].env_id].screenshot(0)
        results["screenshot_png_bytes"] = len(shot)
        results.update(tokens_per_screenshot(shot))
        print("image tokens a screenshot costs:", {k: v for k, v in results.items() if "qwen_" in k or "idefics3_" in k},
              flush=True)
        for kind, folder in models.items():
            engine = open_engine(folder, engine="transformers", temperature=1.0, max_new_tokens=args.max_new_tokens,
                                 device="cpu", llm_url="")
            for n in counts:
                pool = EnvPool(handles[:n], max_steps=args.max_steps, screenshot=kind == "vision")
                policy = ModelPolicy(engine, BUDGETS[args.budgets], version="bench", max_batch=n, background=False,
                                     screens=args.screens)
                clock = {"env_s": 0.0, "lock": threading.Lock()}
                episodes(pool, policy, tasks, n, n, clock)  # warm-up: a step a desktop
                steps, wall = episodes(pool, policy, tasks, n, args.steps, clock)
                results[f"{kind}_steps_per_s_{n}"] = round(steps / wall, 3)
                print(f"{kind}, {n} desktops: {steps / wall:.3f} steps/s ({steps} steps in {wall:.0f} s)", flush=True)
                pool.close()
            engine.close()
        for n in counts:
            results[f"vision_over_text_{n}"] = round(results[f"vision_steps_per_s_{n}"] / results[f"text_steps_per_s_{n}"], 2)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
