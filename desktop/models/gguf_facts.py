"""A GGUF file's facts from its header (gguf_header.py: the weights are not read): architecture,
name, parameters, quantisation, and whether the file is whole (a truncated download ends before
its last tensor) and of an architecture that loads here."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from desktop.models.facts import Kind, ModelFacts
from desktop.model.gguf_header import Header, read_header

# GGUF architectures that load as a text model here (transformers' GGUF loader; see the test that
# holds this list against the installed transformers). llama.cpp names some differently.
SUPPORTED = frozenset({
    "llama", "mistral", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "phi3", "gemma2", "gemma3", "falcon", "gpt2",
    "stablelm", "starcoder2", "nemotron", "deci", "lfm2", "bloom",
})
PROJECTORS = frozenset({"clip", "mmproj"})  # vision projectors beside a model, not models


def read_gguf(path: Path) -> ModelFacts:
    """The facts of one .gguf file; a file that cannot be loaded gets its problem sentence."""
    size = _size(path)
    facts = ModelFacts(str(path), Kind.GGUF, path.stem, size_bytes=size)
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as exc:
        return replace(facts, problem=f"{path.name} cannot be read: {exc.strerror or exc}.")
    if magic != b"GGUF":
        return replace(facts, problem=f"{path.name} is not a GGUF file: it does not start with the GGUF header.")
    try:
        header = read_header(path)
    except (ValueError, OSError, KeyError) as exc:  # Truncated, or values the format does not know
        return replace(facts, problem=f"{path.name} is truncated or damaged ({_short(exc)}): download it again.")
    arch = _text(header, "general.architecture")
    facts = replace(facts, name=_text(header, "general.name") or path.stem, family=arch,
                    params=sum(t.n_elements for t in header.tensors), quant=_quant(header),
                    vision=_has_projector(path))
    end = header.data_end
    if end > size:
        return replace(facts, problem=f"{path.name} is truncated: it ends at {size:,} bytes but its weights "
                                      f"need {end:,}. Download it again.")
    if arch in PROJECTORS:
        return replace(facts, problem=f"{path.name} is a vision projector, not a model: it is used beside one.")
    if arch not in SUPPORTED:
        return replace(facts, problem=f"{path.name} is a {arch or 'unnamed'} model, an architecture Omnidesk "
                                      "cannot run. Choose another model.")
    if not header.tensors:
        return replace(facts, problem=f"{path.name} holds no weights.")
    return facts


def is_projector(path: Path) -> bool:
    return path.name.lower().startswith("mmproj")


def _has_projector(path: Path) -> bool:
    try:
        return any(is_projector(p) for p in path.parent.glob("*.gguf"))
    except OSError:
        return False


def _text(header: Header, key: str) -> str:
    value = header.values.get(key)
    return value if isinstance(value, str) else ""


def _quant(header: Header) -> str:
    from gguf import LlamaFileType

    file_type = header.values.get("general.file_type")
    if isinstance(file_type, int):
        try:
            return LlamaFileType(file_type).name.removeprefix("MOSTLY_").removeprefix("ALL_")
        except ValueError:
            pass
    counts: dict[str, int] = {}
    for t in header.tensors:  # no file type written: the type most weights use
        counts[t.type.name] = counts.get(t.type.name, 0) + t.n_elements
    return max(counts, key=lambda k: counts[k]) if counts else ""


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _short(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:80]
