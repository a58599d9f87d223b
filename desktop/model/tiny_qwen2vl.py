"""A tiny deterministic M-RoPE vision-language model for tests and benches: Qwen2-VL (its own
vision tower, patch merger and the 3-D rotary positions of `get_rope_index`) with a real
Qwen2VLProcessor (the tiny tokenizer plus Qwen's vision tokens, a Qwen2-VL image processor that
keeps the image's aspect ratio, so images of different shapes take different grids) — all built
in code, no files. Images of the test sizes take 16–20 positions and advance the position
counter by 4–8 (the rope delta text after them sees)."""

from __future__ import annotations

from desktop.model.tiny import SPECIAL, tiny_tokenizer
from desktop.model.tiny_vlm import random_init

IMAGE_TOKEN = "<|image_pad|>"
VISION_TOKENS = ["<|vision_start|>", "<|vision_end|>", IMAGE_TOKEN, "<|video_pad|>"]
PATCH, MERGE = 4, 2  # pixels per patch side; patches merged per side (one position = 8×8 pixels)
# ChatML whose content may be a list of parts: image parts become Qwen's vision block, text parts their text.
QWEN2VL_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}{{ '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}"
    "{{ '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def tiny_qwen2vl_processor(min_positions: int = 4, max_positions: int = 24, patch: int = PATCH):
    """A Qwen2VLProcessor over the tiny tokenizer (+ the vision tokens) and a Qwen2-VL image
    processor sized so that an image takes between min_positions and max_positions positions
    (one position: (patch · MERGE)² pixels)."""
    from transformers import AddedToken, Qwen2VLProcessor
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    from desktop.model.processors import images_only

    tok = tiny_tokenizer()
    tok.add_special_tokens({"additional_special_tokens": [AddedToken(t, special=True, normalized=False) for t in VISION_TOKENS]})
    tok.chat_template = QWEN2VL_TEMPLATE
    cell = (patch * MERGE) ** 2
    images = Qwen2VLImageProcessorPil(patch_size=patch, merge_size=MERGE, temporal_patch_size=2,
                                      size={"shortest_edge": cell * min_positions, "longest_edge": cell * max_positions})
    return images_only(Qwen2VLProcessor)(image_processor=images, tokenizer=tok, chat_template=QWEN2VL_TEMPLATE)


def tiny_qwen2vl(seed: int = 0, dtype: str = "float32", hidden: int = 32, layers: int = 2, heads: int = 4,
                 kv_heads: int = 2, intermediate: int | None = None, vision_dim: int = 32, vision_layers: int = 2,
                 vision_heads: int = 4, patch: int = PATCH, std: float = 0.2, v2_5: bool = False, **processor_sizes):
    """(model, processor): a random-init Qwen2VLForConditionalGeneration (`v2_5`: a Qwen2.5-VL,
    whose tower attends in windows; same positions). Same arguments → same weights (drawn from a
    local generator, as tiny_model's are). `tiny_qwen2vl(**sizes)` also builds the bench's
    "small real" sized one."""
    import torch
    from transformers import (Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration, Qwen2VLConfig,
                              Qwen2VLForConditionalGeneration)

    processor = tiny_qwen2vl_processor(patch=patch, **processor_sizes)
    tok = processor.tokenizer
    half = hidden // heads // 2  # rotary frequencies per head, split over (t, h, w)
    section = [half - 2 * (half // 4), half // 4, half // 4]
    ids = {name: tok.convert_tokens_to_ids(t) for name, t in zip(("vision_start", "vision_end", "image", "video"), VISION_TOKENS)}
    vision = dict(depth=vision_layers, embed_dim=vision_dim, hidden_size=hidden, num_heads=vision_heads,
                  mlp_ratio=2 if vision_dim <= 64 else 4, patch_size=patch, spatial_merge_size=MERGE, temporal_patch_size=2)
    if v2_5:
        vision = dict(depth=vision_layers, hidden_size=vision_dim, out_hidden_size=hidden, num_heads=vision_heads,
                      intermediate_size=2 * vision_dim, patch_size=patch, spatial_merge_size=MERGE, temporal_patch_size=2,
                      window_size=4 * patch * MERGE, fullatt_block_indexes=[vision_layers - 1])
    cfg = (Qwen2_5_VLConfig if v2_5 else Qwen2VLConfig)(
        text_config=dict(vocab_size=len(tok), hidden_size=hidden, intermediate_size=intermediate or 2 * hidden, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=4096,
                         initializer_range=std, rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                                 "mrope_section": section},
                         bos_token_id=None, eos_token_id=SPECIAL.index("<|im_end|>"),
                         pad_token_id=SPECIAL.index("<|endoftext|>"), tie_word_embeddings=False),
        vision_config=vision,
        image_token_id=ids["image"], video_token_id=ids["video"], vision_start_token_id=ids["vision_start"],
        vision_end_token_id=ids["vision_end"], tie_word_embeddings=False,
    )
    model = (Qwen2_5_VLForConditionalGeneration if v2_5 else Qwen2VLForConditionalGeneration)(cfg)
    random_init(model, seed, std, norms=("norm.weight", "norm1.weight", "norm2.weight", "ln_q.weight"), vision="visual")
    model = model.to(getattr(torch, dtype)).eval()
    model.config.name_or_path = "omnidesk-tiny-qwen2.5vl" if v2_5 else "omnidesk-tiny-qwen2vl"
    return model, processor
