"""What a GGUF file says about itself, read from its header without loading a weight: the
architecture, context window, KV shape and quantisation; and whether the file is whole. A file
that is not GGUF, is cut short or lacks what a model needs is refused with a sentence."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from desktop.errors import ModelLoadError
from desktop.model.gguf_header import read_header

MAGIC = b"GGUF"


@dataclass(frozen=True, slots=True)
class GgufFacts:
    path: Path
    name: str  # the file's name without .gguf
    architecture: str
    context_length: int
    layers: int
    kv_heads: int
    head_dim: int
    file_type: str  # e.g. "Q4_K_M"; "" when the file does not say
    size: int  # bytes

    def kv_bytes_per_token(self, bytes_per_value: int = 2) -> int:
        """K and V of one token over all layers, at llama.cpp's default f16 cache."""
        return 2 * self.layers * self.kv_heads * self.head_dim * bytes_per_value


def is_gguf_source(source: str) -> bool:
    """Whether a model source names a .gguf file (the embedded "default" and folders do not)."""
    return source.strip().lower().endswith(".gguf")


def read_facts(path: Path | str) -> GgufFacts:
    """The file's facts; raises ModelLoadError naming the problem."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ModelLoadError(f"No model at {path}: the file does not exist. Choose a .gguf file.")
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(4)
    if head != MAGIC:
        raise ModelLoadError(f"{path.name} is not a GGUF model file (it does not start with GGUF). "
                             "Choose another file, or download it again.")
    try:
        header = read_header(path)  # the metadata without decoding the vocabulary (GGUFReader: seconds)
    except (ValueError, OSError, KeyError) as exc:  # Truncated, or values the format does not know
        raise ModelLoadError(f"{path.name} is damaged or cut short ({exc}): the download or copy may not "
                             "have finished. Download it again.") from None
    end = header.data_end
    if not header.tensors or end > size:
        have = f"{size / 1e6:,.0f} of {end / 1e6:,.0f} MB" if end else "no weights"
        raise ModelLoadError(f"{path.name} is cut short ({have}): the download or copy did not finish. "
                             "Download it again.")

    def get(key: str, default=None):
        return header.values.get(key, default)

    arch = str(get("general.architecture", ""))
    if not arch:
        raise ModelLoadError(f"{path.name} does not say which model architecture it holds; it cannot be loaded.")
    heads = int(get(f"{arch}.attention.head_count", 0) or 0)
    hidden = int(get(f"{arch}.embedding_length", 0) or 0)
    kv_heads = int(get(f"{arch}.attention.head_count_kv", heads) or heads)
    head_dim = int(get(f"{arch}.attention.key_length", 0) or (hidden // heads if heads else 0))
    file_type = get("general.file_type")
    try:
        from gguf import LlamaFileType

        kind = LlamaFileType(int(file_type)).name.removeprefix("MOSTLY_") if file_type is not None else ""
    except ValueError:
        kind = ""
    return GgufFacts(path=path, name=path.stem, architecture=arch,
                     context_length=int(get(f"{arch}.context_length", 0) or 0),
                     layers=int(get(f"{arch}.block_count", 0) or 0), kv_heads=kv_heads, head_dim=head_dim,
                     file_type=kind, size=size)
