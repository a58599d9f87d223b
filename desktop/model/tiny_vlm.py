"""A tiny deterministic vision-language model for tests and benches: LLaVA-style (a CLIP vision
tower, a projector, the tiny Llama), with a real LlavaProcessor (the tiny tokenizer plus an
image token, a CLIP image processor) — all built in code, no files. Greedy argmax has clear
margins in fp32, as with the tiny text model. `tiny_vlm(**sizes)` also builds the bench's
"small real" sized one."""

from __future__ import annotations

from desktop.model.tiny import SPECIAL, tiny_tokenizer

IMAGE_TOKEN = "<image>"
# ChatML whose content may be a list of parts: image parts become the image token (then a
# newline), text parts their text.
VLM_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}{{ '<image>\n' }}{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}"
    "{{ '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def tiny_vlm_processor(image_size: int = 32, patch_size: int = 8):
    """A LlavaProcessor over the tiny tokenizer (+ the image token) and a CLIP image processor."""
    from transformers import AddedToken, LlavaProcessor
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    tok = tiny_tokenizer()
    tok.add_special_tokens({"additional_special_tokens": [AddedToken(IMAGE_TOKEN, special=True, normalized=False)]})
    tok.chat_template = VLM_TEMPLATE
    images = CLIPImageProcessorPil(size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size})
    return LlavaProcessor(image_processor=images, tokenizer=tok, patch_size=patch_size, image_token=IMAGE_TOKEN,
                          vision_feature_select_strategy="default", num_additional_image_tokens=1,
                          chat_template=VLM_TEMPLATE)


def tiny_vlm(seed: int = 0, dtype: str = "float32", image_size: int = 32, patch_size: int = 8, hidden: int = 32,
             layers: int = 2, vision_hidden: int = 32, vision_layers: int = 2, heads: int = 4, kv_heads: int = 2,
             intermediate: int | None = None, vision_intermediate: int | None = None, vision_heads: int = 4,
             std: float = 0.2):
    """(model, processor): a random-init LlavaForConditionalGeneration. Same arguments → same weights
    (drawn from a local generator, as tiny_model's are). The defaults: 16 image positions, ~1 ms."""
    import torch
    from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration

    processor = tiny_vlm_processor(image_size, patch_size)
    tok = processor.tokenizer
    text = LlamaConfig(
        vocab_size=len(tok), hidden_size=hidden, intermediate_size=intermediate or 2 * hidden, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=4096, initializer_range=std,
        bos_token_id=None, eos_token_id=SPECIAL.index("<|im_end|>"), pad_token_id=SPECIAL.index("<|endoftext|>"),
        tie_word_embeddings=False,
    )
    vision = CLIPVisionConfig(hidden_size=vision_hidden, intermediate_size=vision_intermediate or 2 * vision_hidden,
                              num_hidden_layers=vision_layers, num_attention_heads=vision_heads,
                              image_size=image_size, patch_size=patch_size, projection_dim=vision_hidden)
    cfg = LlavaConfig(vision_config=vision, text_config=text, image_token_id=tok.convert_tokens_to_ids(IMAGE_TOKEN),
                      vision_feature_select_strategy="default", vision_feature_layer=-1, projector_hidden_act="gelu",
                      image_seq_length=(image_size // patch_size) ** 2)
    model = LlavaForConditionalGeneration(cfg)
    random_init(model, seed, std, norms=("norm.weight", "layer_norm1.weight", "layer_norm2.weight", "layrnorm.weight"),
                vision="vision_tower")
    model = model.to(getattr(torch, dtype)).eval()
    model.config.name_or_path = "omnidesk-tiny-vlm"
    return model, processor


def random_init(model, seed: int, std: float, *, norms: tuple[str, ...], vision: str) -> None:
    """Deterministic weights for a tiny random VLM: norms (names ending in `norms`) at 1, the
    vision tower's (`vision` in the name) biases at 0, its other weights N(0, 0.05), the rest
    N(0, std), drawn in name order from `seed`."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in sorted(model.named_parameters()):
            if name.endswith(norms):
                param.fill_(1.0)
            elif vision in name and name.endswith("bias"):
                param.zero_()
            else:
                param.normal_(0.0, std if vision not in name else 0.05, generator=gen)
