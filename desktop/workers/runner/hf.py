"""HFRunner: the Runner for any transformers causal LM. Each slot's KV is a batch-1 DynamicCache;
the running slots are stacked, left-padded, into one DecodeBatch (model/kv.py) that stays built
between decode steps and changes only when a row joins or leaves.

With an M-RoPE vision model (Qwen2-VL) each slot also keeps a RopeTrack (model/mrope.py): every
prefill chunk and decode step passes explicit 3-D position ids, each row its own (the model's
own fallback keeps one `rope_deltas` for the whole model, wrong for several slots)."""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping, Sequence

import torch

from desktop.errors import InvalidRequest
from desktop.model import kv
from desktop.model.images import NO_IMAGES
from desktop.model.mrope import Placed, RopeTrack
from desktop.model.sampling import Sampler
from desktop.workers.runner.base import DecodeRow, Runner, sample_rows

log = logging.getLogger(__name__)


class HFRunner(Runner):
    kv_layout = "hf-1"  # per layer k.i / v.i: [1, kv_heads, n, head_dim]; M-RoPE image spans in the metadata

    def __init__(self, model: Any, num_slots: int, kv_bytes_per_token: int, vision: Any = None) -> None:
        self.model, self.device, self.vision = model, model.device, vision
        self.num_slots, self.kv_bytes_per_token = num_slots, kv_bytes_per_token
        self.caches: list[Any] = [None] * num_slots  # a slot's own cache while it is not a batch row
        self.batch = kv.DecodeBatch()  # rows keyed by slot index
        self._hooks: list[Any] = []
        self.mrope = bool(vision is not None and getattr(vision, "mrope", False))
        self.tracks = [RopeTrack() for _ in range(num_slots)]  # used with M-RoPE only

    # ------------------------------------------------------------------ forwards

    @torch.no_grad()
    def prefill(self, slot: int, ids: Sequence[int], sample: tuple[Any, Sequence[int]] | None = None,
                media: Mapping[int, Any] | None = None) -> int | None:
        cache = self._own(slot)
        if cache is None:
            cache = self.caches[slot] = kv.new_cache(self.model.config)
        if self.mrope:
            rows = self.tracks[slot].positions(kv.cache_len(cache), ids, lambda key: self.vision.grid(self._image(key, media)))
        ids, extra = self._with_images(list(ids), media)
        if self.mrope:
            extra["position_ids"] = torch.tensor(rows, device=self.device).unsqueeze(1)  # [3, 1, T]
        out = self.model(input_ids=kv.as_batch(ids, self.device), past_key_values=cache,
                         use_cache=True, logits_to_keep=1, **extra)
        if sample is None:
            return None
        sampler, history = sample
        return sampler(out.logits[0, -1].float(), history)

    def _with_images(self, ids: list[int], media: Mapping[int, Any] | None) -> tuple[list[int], dict]:
        """Image positions (negative keys) → the model's placeholder id, plus the image tensors
        of the chunk (each image whole, in order): the vision tower runs for exactly these."""
        if not any(t < 0 for t in ids):
            return ids, {}
        if self.vision is None:
            raise InvalidRequest(NO_IMAGES)
        images, i = [], 0
        while i < len(ids):
            if ids[i] >= 0:
                i += 1
                continue
            image = self._image(ids[i], media)
            n = sum(1 for t in self.vision.prepare(image).ids if t == ids[i])
            if ids[i : i + n] != [ids[i]] * n:
                raise RuntimeError(f"A prefill chunk splits an image at position {i}")  # the scheduler never does
            images.append(image)
            i += n
        extra = self.vision.model_inputs(images, self.device, self.model.dtype)
        return [self.vision.placeholder_id if t < 0 else t for t in ids], extra

    @staticmethod
    def _image(key: int, media: Mapping[int, Any] | None) -> Any:
        image = (media or {}).get(key)
        if image is None:
            raise InvalidRequest("An image of this conversation is missing from the request; send the conversation again.")
        return image

    @torch.no_grad()
    def decode(self, rows: Sequence[DecodeRow]) -> list[int | Exception]:
        self._regroup([r.slot for r in rows])
        by_slot = {r.slot: r for r in rows}
        ordered = [by_slot[s] for s in self.batch.keys]  # the batch's row order
        try:
            inputs = self.batch.step_inputs([r.token for r in ordered], self.device)
            if self.mrope:  # text: all three indices = the row's KV index + its own rope delta
                deltas = torch.tensor([[self.tracks[s].delta(self.batch.row_len(s))] for s in self.batch.keys],
                                      device=self.device)
                inputs["position_ids"] = (inputs["position_ids"] + deltas).unsqueeze(0).expand(3, -1, -1)
            out = self.model(**inputs, use_cache=True)
        except BaseException:  # the batched cache is now unreliable: every row's KV is gone
            self.batch = kv.DecodeBatch()
            raise
        tokens = sample_rows(ordered, out.logits[:, -1].float())
        result = dict(zip(self.batch.keys, tokens))
        return [result[r.slot] for r in rows]

    def sampler(self, params: Any) -> Sampler:
        return Sampler(params, str(self.device))

    def _regroup(self, slots: list[int]) -> None:
        """Make the batch's rows exactly `slots`: rows that left go back to their own cache, new
        ones join (a re-stack, once per join, not per step)."""
        for key in [k for k in self.batch.keys if k not in slots]:
            self.caches[key] = self.batch.remove(key)
        for slot in slots:
            if slot not in self.batch.keys:
                self.batch.add(slot, self.caches[slot])
                self.caches[slot] = None

    def _own(self, slot: int) -> Any:
        """The slot's own cache, taken out of the decode batch first if it is a row of it."""
        if slot in self.batch.keys:
            self.caches[slot] = self.batch.remove(slot)
        return self.caches[slot]

    # ------------------------------------------------------------------ KV bookkeeping

    def kv_len(self, slot: int) -> int:
        if slot in self.batch.keys:
            if kv.agreed_len(self.batch.cache) != self.batch.width:
                return -1
            return self.batch.row_len(slot)
        return kv.agreed_len(self.caches[slot])

    def crop(self, slot: int, n: int) -> None:
        cache = self._own(slot)
        if cache is not None:
            kv.crop_to(cache, n)
        self.tracks[slot].crop(n)

    def copy_prefix(self, src: int, dst: int, n: int) -> None:
        source = self._own(src)
        self._own(dst)
        self.caches[dst] = kv.clone_prefix(source, n)
        self.tracks[dst] = self.tracks[src].prefix(n)

    def clear(self, slot: int) -> None:
        self._own(slot)
        self.caches[slot] = None
        self.tracks[slot] = RopeTrack()

    def export_prefix(self, slot: int, n: int) -> Any:
        """The KV copy in host memory, with the slot's image places under M-RoPE."""
        saved = kv.to_device(kv.clone_prefix(self._own(slot), n), "cpu")
        return (saved, self.tracks[slot].prefix(n)) if self.mrope else saved

    def import_prefix(self, saved: Any, slot: int, room: int = 0) -> None:
        self._own(slot)
        cache, track = saved if self.mrope else (saved, RopeTrack())
        self.caches[slot] = kv.to_device(cache, self.device, copy=True)
        self.tracks[slot] = track.prefix(kv.cache_len(cache))

    def saved_nbytes(self, saved: Any) -> int:
        return kv.nbytes(saved[0] if self.mrope else saved)

    def pack(self, saved: Any) -> tuple[dict[str, torch.Tensor], dict]:
        cache, track = saved if self.mrope else (saved, RopeTrack())
        layers = kv.layers_kv(cache)
        tensors = {f"k.{i}": k for i, (k, _) in enumerate(layers)} | {f"v.{i}": v for i, (_, v) in enumerate(layers)}
        spans = [[s.start, s.length, s.advance] for s in track.spans]
        return tensors, {"layers": len(layers), "spans": spans}

    def unpack(self, tensors: dict[str, torch.Tensor], meta: dict, n: int) -> Any:
        layers = range(int(meta["layers"]))
        cache = kv.from_layers([(tensors[f"k.{i}"][:, :, :n], tensors[f"v.{i}"][:, :, :n]) for i in layers])
        if not self.mrope:
            return cache
        return cache, RopeTrack([Placed(int(a), int(b), int(c)) for a, b, c in meta.get("spans", [])]).prefix(n)

    # ------------------------------------------------------------------ liveness

    def watch_layers(self, on_layer: Callable[[], None] | None) -> None:
        """Forward hooks on the decoder layers (the ModuleList of `num_hidden_layers` modules)."""
        for hook in self._hooks:
            hook.remove()
        self._hooks = []
        if on_layer is None:
            return
        config = getattr(self.model, "config", None)
        layers = getattr(config.get_text_config() if hasattr(config, "get_text_config") else config, "num_hidden_layers", None)
        for module in self.model.modules():
            if isinstance(module, torch.nn.ModuleList) and len(module) == layers:
                self._hooks = [layer.register_forward_hook(lambda *_: on_layer()) for layer in module]
                return
        log.info("No decoder layers found: heartbeats count scheduler ticks only")
