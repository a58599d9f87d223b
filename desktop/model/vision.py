"""What a vision-language model needs of an image: the ids it expands to and the tensors its
vision tower takes, both from the model's own processor (so a user's model and the tiny test
model go through the same code).

An image in a message is rendered by the chat template as the processor's image token; the
processor turns that token into the model's run of placeholder ids (LLaVA: one per patch) and
the image into pixel tensors. In a worker's ids the placeholders become the image's key
(images.ImageData.key); the runner maps them back to the placeholder id and passes the tensors
with exactly the chunk that holds them, so the vision tower runs once per image in a slot.

M-RoPE models (Qwen2-VL: `get_rope_index`) also need each image's grid (`Vision.grid`): the
runner gives image and text positions their 3-D rotary indices itself (model/mrope.py). At load,
those indices are checked against the model's own `get_rope_index` on a probe prompt; a model
whose indices differ (another M-RoPE variant) is refused."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any, Sequence

from desktop.bounded import BoundedDict
from desktop.errors import InvalidRequest, ModelLoadError
from desktop.model.images import ImageData
from desktop.model.mrope import Grid, RopeTrack

log = logging.getLogger(__name__)
PREPARED = 32  # images whose tensors are kept (the template counts tokens, the runner encodes)


@dataclass(frozen=True, slots=True)
class Prepared:
    """One image for this model: its expansion in ids (placeholders as the image's key) and the
    processor's tensors for it (pixel_values and whatever else the model's forward takes)."""

    ids: tuple[int, ...]
    tensors: dict[str, Any]

    @property
    def positions(self) -> int:
        return len(self.ids)


class Vision:
    """The image side of a loaded VLM: its processor, image token and placeholder id."""

    def __init__(self, processor: Any, placeholder_id: int, image_token: str, name: str = "the model",
                 merge: int | None = None) -> None:
        """`merge`: for an M-RoPE model, the patches merged per side into one position (else None)."""
        self.processor, self.placeholder_id, self.image_token, self.name = processor, placeholder_id, image_token, name
        self.merge = merge
        self._cache: BoundedDict[bytes, Prepared] = BoundedDict(PREPARED, lru=True)
        self._lock = threading.Lock()
        self._probe()

    @classmethod
    def from_processor(cls, processor: Any, config: Any, name: str, model: Any = None) -> "Vision":
        """From a model's processor and config; ModelLoadError where the pair cannot take images
        (or places image positions by an M-RoPE rule other than Qwen2-VL's)."""
        rope_model = next((m for m in (getattr(model, "model", None), model) if hasattr(m, "get_rope_index")), None)
        if getattr(processor, "image_processor", None) is None:
            raise ModelLoadError(f"The processor of {name} has no image processor (preprocessor_config.json); it cannot read images.")
        token = getattr(processor, "image_token", None)
        pid = getattr(config, "image_token_id", None)
        if pid is None:
            pid = getattr(config, "image_token_index", None)
        if not isinstance(token, str) or pid is None:
            raise ModelLoadError(f"{name} names no image token; Omnidesk cannot place images in its prompt.")
        if rope_model is None:
            return cls(processor, int(pid), token, name)
        merge = getattr(getattr(config, "vision_config", None), "spatial_merge_size", None)
        if not isinstance(merge, int) or merge < 1:
            raise ModelLoadError(f"{name} uses M-RoPE but names no spatial_merge_size; Omnidesk cannot place its image positions.")
        vision = cls(processor, int(pid), token, name, merge)
        vision._check_mrope(rope_model)
        return vision

    @property
    def mrope(self) -> bool:
        """Whether image positions take 3-D rotary indices (Qwen2-VL style; see model/mrope.py)."""
        return self.merge is not None

    def grid(self, image: ImageData) -> Grid:
        """The image's t × h × w grid in the language model's positions (M-RoPE models)."""
        thw = self.prepare(image).tensors.get("image_grid_thw")
        if thw is None or self.merge is None:
            raise InvalidRequest(f"The processor of {self.name} gives no image grid; it cannot place this image.")
        t, h, w = (int(v) for v in thw.reshape(-1, 3)[0].tolist())
        return Grid(t, h // self.merge, w // self.merge)

    def _check_mrope(self, rope_model: Any) -> None:
        """Our 3-D indices must equal the model's own get_rope_index on a probe prompt (text, a
        wide image, text, a tall image, text); ModelLoadError if they differ or it cannot tell."""
        import torch

        probes = [_blank(72, 24), _blank(24, 56)]
        grids = [self.grid(p) for p in probes]
        ids: list[int] = [1, 2, 3]
        for probe, grid in zip(probes, grids):
            ids += [probe.key] * grid.length + [4, 5]
        expected = RopeTrack().positions(0, ids, lambda key: grids[[p.key for p in probes].index(key)])
        tensor = torch.tensor([[self.placeholder_id if t < 0 else t for t in ids]])
        thw = torch.cat([self.prepare(p).tensors["image_grid_thw"].reshape(-1, 3) for p in probes])
        try:
            theirs, _ = rope_model.get_rope_index(input_ids=tensor, mm_token_type_ids=(tensor == self.placeholder_id).int(),
                                                  image_grid_thw=thw)
            same = theirs[:, 0].tolist() == expected
        except Exception as exc:  # another signature or rule
            log.info("get_rope_index of %s did not run on the probe: %s", self.name, exc)
            same = False
        if not same:
            raise ModelLoadError(f"{self.name} places image positions by a rotary rule (M-RoPE) other than Qwen2-VL's; "
                                 "Omnidesk's KV cache does not support it yet. LLaVA-style and Qwen2-VL-style models are supported.")

    def _probe(self) -> None:
        """One blank image through the processor: its placeholders must form one run (LLaVA-style);
        models that tile an image into several runs (Idefics3, SmolVLM) are not yet taken."""
        probe = _blank(64, 48)
        try:
            prepared = self.prepare(probe)
        except InvalidRequest as exc:
            raise ModelLoadError(f"The processor of {self.name} cannot prepare images: {exc.message}") from exc
        runs = sum(1 for i, t in enumerate(prepared.ids) if t == probe.key and (i == 0 or prepared.ids[i - 1] != t))
        if runs != 1:
            raise ModelLoadError(f"{self.name} splits an image into {runs} pieces in its prompt; images in this "
                                 "architecture are not supported yet (LLaVA-style models are).")

    def prepare(self, image: ImageData) -> Prepared:
        """The ids and tensors of `image` for this model (kept for the last few images)."""
        with self._lock:
            hit = self._cache.get(image.sha256)
            if hit is not None:
                return hit
        try:
            out = self.processor(text=self.image_token, images=[image.pil()], return_tensors="pt", add_special_tokens=False)
        except Exception as exc:  # a size or mode the processor refuses
            raise InvalidRequest(f"The model cannot take this image ({image.width}×{image.height}, {image.mime}): {exc}") from exc
        ids = tuple(image.key if t == self.placeholder_id else t for t in out["input_ids"][0].tolist())
        if image.key not in ids:
            raise InvalidRequest(f"The processor of {self.name} made no image placeholders for this image.")
        tensors = {k: v for k, v in out.items() if k not in ("input_ids", "attention_mask", "token_type_ids", "mm_token_type_ids")}
        prepared = Prepared(ids, tensors)
        with self._lock:
            self._cache[image.sha256] = prepared
        return prepared

    def expand(self, ids: Sequence[int], images: Sequence[ImageData]) -> list[int]:
        """`ids` with each occurrence of the image token (in order) replaced by its image's expansion."""
        token_id = self.processor.tokenizer.convert_tokens_to_ids(self.image_token)
        places = [i for i, t in enumerate(ids) if t == token_id]
        if len(places) != len(images):
            raise InvalidRequest(f"The chat template of {self.name} placed {len(places)} images for {len(images)} attached; "
                                 "it does not render image parts.")
        out: list[int] = []
        last = 0
        for at, image in zip(places, images):
            out.extend(ids[last:at])
            out.extend(self.prepare(image).ids)
            last = at + 1
        out.extend(ids[last:])
        return out

    def model_inputs(self, images: Sequence[ImageData], device: Any, dtype: Any) -> dict[str, Any]:
        """Forward kwargs for these images, in order (tensors stacked along the batch of images)."""
        import torch

        parts = [self.prepare(image).tensors for image in images]
        out: dict[str, Any] = {}
        for key in parts[0]:
            value = torch.cat([p[key] for p in parts])
            out[key] = value.to(device, dtype) if value.is_floating_point() else value.to(device)
        return out


def _blank(width: int, height: int) -> ImageData:
    """A grey probe image."""
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (width, height), (127, 127, 127)).save(buf, "PNG")
    return ImageData.from_bytes(buf.getvalue())
