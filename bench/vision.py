"""Images in the KV cache, measured on a random-init VLM sized like a small real one (built from a
config, no download): LLaVA-style, a CLIP/SigLIP-B-sized vision tower (768 wide, 12 layers,
384 px in 16 px patches: 576 image positions) and a SmolLM2-135M-sized Llama (576 wide, 30
layers), fp32. `--arch qwen2vl`: the same sizes as a Qwen2-VL (its own vision tower in 14 px
patches merged 2×2, M-RoPE positions; a 640×480 image takes 391 positions).

A conversation: a system prompt, a user turn with one 640×480 photo-like image and a question,
a reply, then a text follow-up. The reply is a fixed sentence, not the random model's own output
(whose random bytes would not re-tokenise alike, unlike a real model's words): after the image
turn it is put into the slot by a request with max_tokens 0 (as a real model's reply is there
once generated), so the follow-up computes only its own text, as it would after a real reply. Measured through the worker (LocalClient):
- image_turn_ttft_ms: TTFT of the image turn (the image encoded, everything prefilled);
- followup_ttft_cached_ms: TTFT of the text follow-up with the cache (the image's KV kept: only
  the reply and the new text are computed, the vision tower does not run);
- followup_ttft_uncached_ms: the same follow-up with the cache off (image re-encoded, all re-prefilled);
- image_followup_speedup = uncached / cached (target ≥ 10);
- image_encode_ms: the vision tower + projector for one image; image_positions: its KV positions;
- vision_calls_followup: images the vision tower encoded during the cached follow-ups (0).
Best of --reps runs (this machine is shared: load only adds time), and the medians' ratio too.
Then the camera during a call (`--no-camera` skips it): bench/call.py's scripted call (--quick:
the embedded model, Whisper, Piper, the echo loop, in real time) with the fake camera (640×480
MJPG at 15 fps) on; camera_fps_ratio = frames it delivered per second over the configured rate
(target ≥ 0.9), frames_sampled_per_s = frames taken for the model (1 a second configured).
The last line is JSON. `--quick` shrinks the model (a smoke run)."""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from desktop.model.images import ImageData  # noqa: E402
from desktop.model.loader import assemble  # noqa: E402
from desktop.model.messages import Message  # noqa: E402
from desktop.model.params import SamplingParams  # noqa: E402
from desktop.model.tiny_qwen2vl import tiny_qwen2vl  # noqa: E402
from desktop.model.tiny_vlm import tiny_vlm  # noqa: E402
from desktop.protocol import Chat, Done  # noqa: E402
from desktop.workers.config import WorkerConfig  # noqa: E402
from desktop.workers.local import LocalClient  # noqa: E402

SMALL = dict(image_size=384, patch_size=16, vision_hidden=768, vision_layers=12, vision_heads=12, vision_intermediate=3072,
             hidden=576, layers=30, heads=9, kv_heads=3, intermediate=1536, std=0.02)
QUICK = dict(image_size=96, patch_size=16, vision_hidden=128, vision_layers=2, vision_heads=4, hidden=128, layers=4,
             heads=4, kv_heads=2, std=0.02)
SMALL_QWEN = dict(patch=14, vision_dim=768, vision_layers=12, vision_heads=12, hidden=576, layers=30, heads=9, kv_heads=3,
                  intermediate=1536, std=0.02, min_positions=4, max_positions=1024)
QUICK_QWEN = dict(patch=14, vision_dim=128, vision_layers=2, vision_heads=4, hidden=128, layers=4, heads=4, kv_heads=2,
                  std=0.02, min_positions=4, max_positions=96)
REPLY = "The picture shows a smooth colour gradient, dark at the top left and bright at the bottom right, with fine noise."
SYSTEM = "You are a careful assistant. Describe pictures plainly and answer questions about them briefly. " * 3


def photo(seed: int = 0, size: tuple[int, int] = (640, 480)) -> ImageData:
    """A photo-like JPEG: smooth colour gradients plus noise, from `seed`."""
    from PIL import Image

    gen = torch.Generator().manual_seed(seed)
    w, h = size
    x = torch.linspace(0, 1, w)[None, :, None]
    y = torch.linspace(0, 1, h)[:, None, None]
    base = torch.cat([x.expand(h, w, 1), y.expand(h, w, 1), (x * y).expand(h, w, 1)], dim=2)
    pixels = ((base * 0.8 + torch.rand((h, w, 3), generator=gen) * 0.2) * 255).to(torch.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels.numpy()).save(buf, "JPEG", quality=90)
    return ImageData.from_bytes(buf.getvalue())


def run(client: LocalClient, rid: str, msgs: list[Message], max_tokens: int) -> Done:
    done = client.run(Chat(rid, tuple(msgs), SamplingParams(max_tokens=max_tokens)))[-1]
    if not isinstance(done, Done):
        raise SystemExit(f"{rid} failed: {done}")
    return done


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a much smaller model: a smoke run of the bench")
    p.add_argument("--arch", choices=["llava", "qwen2vl"], default="llava", help="LLaVA-style, or Qwen2-VL (M-RoPE)")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--no-camera", action="store_true", help="skip the camera-during-a-call part")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    qwen = args.arch == "qwen2vl"
    sizes = (QUICK_QWEN if args.quick else SMALL_QWEN) if qwen else (QUICK if args.quick else SMALL)
    t0 = time.perf_counter()
    model, processor = (tiny_qwen2vl if qwen else tiny_vlm)(**sizes)
    model = model.to(args.device)
    lm = assemble(model, processor.tokenizer, "bench-vlm", args.device, "float32", processor)
    build_s = time.perf_counter() - t0
    params = sum(p.numel() for p in model.parameters())
    image = photo()
    positions = lm.vision.prepare(image).positions

    encodes = []
    pixels = lm.vision.model_inputs([image], model.device, model.dtype)
    with torch.no_grad():
        model.model.get_image_features(**pixels)  # warm-up
        for _ in range(args.reps):
            t = time.perf_counter()
            model.model.get_image_features(**pixels)
            if args.device != "cpu":
                torch.cuda.synchronize()
            encodes.append(1000 * (time.perf_counter() - t))

    encoded = [0]
    def count(module, args, kwargs, out):  # images encoded: LLaVA's pixel batch, Qwen2-VL's grid rows
        batch = kwargs["grid_thw"] if qwen else kwargs.get("pixel_values", args[0] if args else None)
        encoded[0] += batch.shape[0]

    hook = (model.model.visual if qwen else model.model.vision_tower).register_forward_hook(count, with_kwargs=True)
    warm = LocalClient(lm, WorkerConfig(num_slots=4, cache_mode="imc+spc"))
    cold = LocalClient(lm, WorkerConfig(num_slots=2, cache_mode="off"))
    run(warm, "warm-up", [Message("user", "Warm up.", (photo(1),))], 1)  # first-call costs, another image
    turn = [Message("system", SYSTEM), Message("user", "What is in this picture? Describe it.", (image,))]
    first = run(warm, "image-turn", turn, 1)
    run(warm, "reply", turn + [Message("assistant", REPLY)], 0)  # the reply in the slot, as if generated
    cached, uncached, follow_calls = [], [], 0
    for r in range(args.reps):  # each follow-up another text: an edit of the last message, the rest kept
        msgs = turn + [Message("assistant", REPLY), Message("user", f"And what colours are in its corners? Answer in {r + 2} words.")]
        before = encoded[0]
        done = run(warm, f"f{r}", msgs, 1)
        calls = encoded[0] - before
        follow_calls += calls
        again = run(cold, f"u{r}", msgs, 1)
        if done.token_ids != again.token_ids:
            raise SystemExit(f"cached and uncached follow-ups disagree: {done.token_ids} != {again.token_ids}")
        cached.append(done.stats.ttft_ms)
        uncached.append(again.stats.ttft_ms)
        print(f"follow-up {r + 1}: cached {done.stats.ttft_ms:.0f} ms ({done.stats.cached_tokens}/{done.stats.input_tokens} "
              f"tokens cached, {calls} images encoded), uncached {again.stats.ttft_ms:.0f} ms", flush=True)
    hook.remove()
    med = statistics.median
    result = {
        "model": (f"random-init {'Qwen2-VL' if qwen else 'LLaVA-style'} (quick)" if args.quick else
                  "random-init Qwen2-VL (M-RoPE), ViT-B/14-sized tower + SmolLM2-135M sized" if qwen else
                  "random-init LLaVA-style, SigLIP-B/16-384 + SmolLM2-135M sized"),
        "arch": args.arch,
        "params_m": round(params / 1e6, 1),
        "device": args.device,
        "build_s": round(build_s, 2),
        "image_positions": positions,
        "image_encode_ms": round(min(encodes), 1),
        "image_turn_ttft_ms": round(first.stats.ttft_ms, 1),
        "followup_ttft_cached_ms": round(min(cached), 1),
        "followup_ttft_uncached_ms": round(min(uncached), 1),
        "image_followup_speedup": round(min(uncached) / min(cached), 1),
        "image_followup_speedup_median": round(med(uncached) / med(cached), 1),
        "vision_calls_followup": follow_calls,
        "reps": args.reps,
    }
    if not args.no_camera:
        result.update(camera_during_call())
    print(json.dumps(result), flush=True)


def camera_during_call() -> dict:
    """The fake camera's delivery while a scripted call runs (bench/call.py --quick --camera)."""
    import asyncio

    import call  # bench/call.py, beside this file

    out = asyncio.run(call.run(call.parse(["--quick", "--camera", "--turns", "3"])))
    keys = ("camera_fps", "camera_fps_wanted", "camera_fps_ratio", "frames_sampled_per_s", "eos_to_audio_ms_p50")
    return {("call_" + k if k == "eos_to_audio_ms_p50" else k): out.get(k) for k in keys}


if __name__ == "__main__":
    main()
