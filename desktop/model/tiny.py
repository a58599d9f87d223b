"""A tiny deterministic chat model for tests: a byte-level BPE tokenizer trained in code with a
ChatML template, and a random-init Llama. No files; each build is identical; ~1 ms per forward."""

from __future__ import annotations

from functools import lru_cache

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_CORPUS = [
    "Hello there, how are you today? I am fine, thank you for asking.",
    "The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs.",
    "You are a helpful assistant. Answer briefly and clearly, in plain words.",
    "What is the weather like? It is sunny and warm, with a light breeze from the sea.",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 1000. Code: def f(x): return x * 2",
    "Ünïcödé: café, naïve, 日本語, emoji 🙂 and more.",
]
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


@lru_cache(maxsize=1)
def _tokenizer_json() -> str:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=340,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 4, trainer)
    return tok.to_str()


def tiny_tokenizer():
    """A fresh PreTrainedTokenizerFast with the ChatML template; EOS is <|im_end|>."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(_tokenizer_json()),
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    tok.chat_template = CHATML_TEMPLATE
    return tok


def tiny_model(seed: int = 0, dtype: str = "float32", vocab_size: int | None = None):
    """A random-init 2-layer Llama sized for the tiny tokenizer. Same seed → same weights.

    The weights are drawn wider than usual (std 0.2) so greedy argmax has clear margins and
    fp32 rounding between cached and uncached paths never flips a token. They come from a local
    generator, never torch's global one: two threads building tiny models at once (two hosts in
    one test) must still get the same weights."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    vocab = vocab_size or len(tiny_tokenizer())
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        initializer_range=0.2,
        bos_token_id=None,
        eos_token_id=SPECIAL.index("<|im_end|>"),
        pad_token_id=SPECIAL.index("<|endoftext|>"),
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(cfg)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in sorted(model.named_parameters()):
            if name.endswith("norm.weight"):
                param.fill_(1.0)  # RMSNorm scales start at one, as transformers' own init does
            else:
                param.normal_(0.0, cfg.initializer_range, generator=gen)
    model = model.to(getattr(torch, dtype)).eval()
    model.config.name_or_path = "omnidesk-tiny"
    return model
