"""Loading an LLM for a worker: the embedded default, the tiny test model, a local Hugging Face
folder or a GGUF file, into model + tokenizer + chat template, failing only with ModelLoadError."""

from __future__ import annotations

import logging
import os
import re
import stat
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from desktop.errors import InvalidRequest, ModelLoadError
from desktop.model import dtype as dtypes
from desktop.model.chat_template import ChatTemplate
from desktop.model.load_errors import load_errors as _load_errors
from desktop.model.default_model import (
    Progress,
    converted_default_dir,
    embedded_default_gguf,
    ensure_converted,
)
from desktop.model.quiet_gguf import no_gguf_progress_bar
from desktop.model.weight_progress import weights_progress
from desktop.safefile import load_json

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers is imported on this path

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "LoadedModel", "ModelSpec", "assemble", "context_length", "converted_default_dir", "embedded_default_gguf",
    "kv_bytes_per_token", "load_model",
]

DTYPE_SIZES = {"float32": 4, "bfloat16": 2, "float16": 2}
MAX_CONTEXT = 131072  # configs may claim 1M+ positions; nothing here would fill that
MAX_CONFIG_BYTES = 4 << 20  # a model's config.json is a few KB; a larger one is refused unread
TINY_NAME = "omnidesk-tiny"
TINY_VLM_NAME = "omnidesk-tiny-vlm"
TINY_QWEN2VL_NAME = "omnidesk-tiny-qwen2vl"
PROCESSOR_FILES = ("preprocessor_config.json", "processor_config.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tiktoken.model")
_DEVICE = re.compile(r"cpu|cuda(:\d+)?")
# Never download, never run Python shipped in a model folder (transformers would otherwise ask on
# stdin "Do you wish to run the custom code? [y/N]" and run it on "y").
NO_REMOTE = {"local_files_only": True, "trust_remote_code": False}
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """What to load and where. `source`: "default" (embedded SmolLM2), "tiny" (test model),
    "tiny-vlm" (test vision model, LLaVA-style), "tiny-qwen2vl" (test vision model, M-RoPE), a local Hugging Face model folder (a text or an
    image-text-to-text model), or a .gguf file."""

    source: str = "default"
    dtype: str = "float32"  # or "auto" (the app's default: bf16 where the hardware has it)
    device: str = "cpu"

    def __post_init__(self) -> None:
        if not isinstance(self.source, str) or not self.source.strip():
            raise ModelLoadError('No model chosen: use "default", a model folder or a .gguf file.')
        if self.dtype not in DTYPE_SIZES and self.dtype != dtypes.AUTO:
            raise ModelLoadError(
                f"Unknown dtype {self.dtype!r}: use auto or one of {', '.join(DTYPE_SIZES)}."
            )
        if not isinstance(self.device, str) or not _DEVICE.fullmatch(self.device):
            raise ModelLoadError(f"Unknown device {self.device!r}: use cpu, cuda or cuda:N (e.g. cuda:1).")


@dataclass
class LoadedModel:
    """A model ready for inference (eval mode, on `device`, in `dtype`) with its tokenizer."""

    model: "PreTrainedModel"
    tokenizer: "PreTrainedTokenizerBase"
    template: ChatTemplate
    name: str
    context_length: int
    kv_bytes_per_token: int
    device: str
    dtype: str
    vision: Any = None  # model/vision.Vision of a vision-language model, else None

    @property
    def supports_images(self) -> bool:
        return self.vision is not None


def load_model(spec: ModelSpec, progress: Progress | None = None, static: bool = False) -> LoadedModel:
    """Load `spec`, calling `progress(stage, fraction or None)` at each stage. `static`: the
    caller runs it with the static runner only; the embedded default then comes as LlamaWeights
    mapped from its packed file (model/fast_start.py), written by the first start that lacks it.

    Every failure the user can cause (missing path, not a model, unsupported architecture,
    corrupt files, no CUDA, out of memory) raises ModelLoadError with the cause chained.
    A dtype of "auto" becomes bfloat16 or float32 here (model/dtype.py); LoadedModel.dtype says which."""
    report = progress or (lambda stage, fraction: None)
    start = time.perf_counter()
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # our own progress callback reports the stages
    _check_device(spec.device)
    spec = replace(spec, dtype=dtypes.resolve(spec.dtype, spec.device))
    processor = None
    if spec.source == "tiny":
        name, (model, tokenizer) = TINY_NAME, _load_tiny(spec, report)
    elif spec.source == "tiny-vlm":
        name, (model, tokenizer, processor) = TINY_VLM_NAME, _load_tiny_vlm(spec, report)
    elif spec.source == "tiny-qwen2vl":
        name, (model, tokenizer, processor) = TINY_QWEN2VL_NAME, _load_tiny_vlm(spec, report, qwen2vl=True)
    elif spec.source == "default":
        with _load_errors("the embedded default model"):
            folder = ensure_converted(report)
        name = folder.name.rsplit("-", 1)[0]  # "<name>-<hash>", see converted_default_dir()
        hint = f" (delete {folder} to convert it again)"
        model, tokenizer = _load_packed(folder, spec, report, hint) if static else _load_folder(folder, spec, report, hint)
    else:
        path, is_gguf = _resolve(spec.source)
        name = path.stem if is_gguf else path.name
        if is_gguf:
            model, tokenizer = _load_gguf(path, spec, report)
        elif _is_vlm(path):
            model, tokenizer, processor = _load_vlm_folder(path, spec, report)
        else:
            model, tokenizer = _load_folder(path, spec, report)
    loaded = assemble(model, tokenizer, name, spec.device, spec.dtype, processor)
    log.info("Loaded %s (%s, %s) in %.2f s", name, spec.dtype, spec.device, time.perf_counter() - start)
    report("Ready", 1.0)
    return loaded


def assemble(model: Any, tokenizer: Any, name: str, device: str, dtype: str, processor: Any = None) -> LoadedModel:
    """A LoadedModel from a model in memory (eval mode, on `device`, in `dtype`) and its tokenizer,
    plus its processor for a vision-language model; ModelLoadError where they cannot chat."""
    if hasattr(model, "eval"):  # LlamaWeights (static runner only) have no training mode
        model.eval()
    with _load_errors(f"{name}'s model configuration"):
        context, kv_bytes = context_length(model.config), kv_bytes_per_token(model.config, dtype)
    vision = None
    if processor is not None:
        from desktop.model.vision import Vision

        with _load_errors(f"the processor of {name}"):
            vision = Vision.from_processor(processor, model.config, name, model)
    try:
        template = ChatTemplate(tokenizer, vision=vision)
    except InvalidRequest as exc:  # the template refused even a one-message probe
        raise ModelLoadError(f"The chat template of {name} does not work: {exc.message}") from exc
    return LoadedModel(model, tokenizer, template, name, context, kv_bytes, device, dtype, vision)


def context_length(config: Any) -> int:
    """Context window from the (text) config, capped at MAX_CONTEXT; 2048 if it names none."""
    cfg = config.get_text_config()
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(cfg, key, None)
        if isinstance(value, int) and value > 0:
            return min(value, MAX_CONTEXT)
    return 2048


def kv_bytes_per_token(config: Any, dtype: str) -> int:
    """Bytes of K and V one token adds to the cache: 2 · layers · kv_heads · head_dim · size."""
    cfg = config.get_text_config()
    heads = cfg.num_attention_heads
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    return 2 * cfg.num_hidden_layers * kv_heads * head_dim * DTYPE_SIZES[dtype]


def _load_tiny(spec: ModelSpec, report: Progress):
    from desktop.model.tiny import tiny_model, tiny_tokenizer

    report("Loading tokenizer…", None)
    tokenizer = tiny_tokenizer()
    report("Loading model…", None)
    with _load_errors("the tiny test model"):
        model = tiny_model(dtype=spec.dtype).to(spec.device)
    return model, tokenizer


def _load_tiny_vlm(spec: ModelSpec, report: Progress, qwen2vl: bool = False):
    if qwen2vl:
        from desktop.model.tiny_qwen2vl import tiny_qwen2vl as build
    else:
        from desktop.model.tiny_vlm import tiny_vlm as build

    report("Loading model…", None)
    with _load_errors("the tiny test vision model"):
        model, processor = build(dtype=spec.dtype)
        model = model.to(spec.device)
    return model, processor.tokenizer, processor


def _is_vlm(folder: Path) -> bool:
    """Whether the folder's config is an image-text-to-text model (checked again on loading)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    try:
        config = read_config(folder)
    except (OSError, ValueError):
        return False  # _check_folder says what is wrong with it
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    kind = config.get("model_type") if isinstance(config, dict) else None
    if kind not in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES:
        return False
    # a type that is also a causal LM (Gemma 3 and others) is loaded as a VLM where its processor is there
    return kind not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES or any((folder / n).is_file() for n in PROCESSOR_FILES)


def _load_vlm_folder(folder: Path, spec: ModelSpec, report: Progress):
    """A vision-language model folder: processor (tokenizer + image processor), then the weights."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    _check_folder(folder, vision=True)
    report("Loading processor…", None)
    with _load_errors(f"the processor in {folder}"):
        try:
            processor = AutoProcessor.from_pretrained(folder, **NO_REMOTE)
        except ImportError as exc:  # e.g. a video processor that needs torchvision: images need none of it
            from desktop.model.processors import load_images_only

            log.info("Full processor of %s not loaded (%s); loading its image side only", folder, exc)
            model_type = read_config(folder).get("model_type")
            try:
                processor = load_images_only(folder, model_type)
            except (ValueError, ImportError):
                raise exc from None
    tokenizer = getattr(processor, "tokenizer", None)
    if tokenizer is None or getattr(processor, "image_processor", None) is None:
        raise ModelLoadError(f"The processor in {folder} has no tokenizer and image processor; the vision model's files are incomplete.")
    if not getattr(tokenizer, "chat_template", None) and getattr(processor, "chat_template", None):
        tokenizer.chat_template = processor.chat_template  # VLMs often keep the template with the processor
    report("Loading model…", None)
    with _load_errors(f"the model in {folder}"), weights_progress(report):
        model = AutoModelForImageTextToText.from_pretrained(
            folder, dtype=getattr(torch, spec.dtype), **NO_REMOTE, **_placement(spec.device)
        )
    return model, tokenizer, processor


def _load_folder(folder: Path, spec: ModelSpec, report: Progress, hint: str = ""):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _check_folder(folder)
    # Tokenizer first: it is quick and fails fast before the slow weight load.
    report("Loading tokenizer…", None)
    with _load_errors(f"the tokenizer in {folder}{hint}"):
        tokenizer = AutoTokenizer.from_pretrained(folder, **NO_REMOTE)
    report("Loading model…", None)
    with _load_errors(f"the model in {folder}{hint}"), weights_progress(report):
        model = AutoModelForCausalLM.from_pretrained(
            folder, dtype=getattr(torch, spec.dtype), **NO_REMOTE, **_placement(spec.device)
        )
    return model, tokenizer


def _load_packed(folder: Path, spec: ModelSpec, report: Progress, hint: str):
    """A Llama folder for the static runner: its packed weights when they are there (no
    transformers model), else the folder through transformers, packed and written for next time."""
    from desktop.model import fast_start

    try:
        config = read_config(folder)
    except (OSError, ValueError):
        config = None  # the slow path says what is wrong with it
    weights = fast_start.read_packed(folder, config, spec.dtype, spec.device) if isinstance(config, dict) else None
    if weights is None:
        model, tokenizer = _load_folder(folder, spec, report, hint)
        report("Packing the weights for a faster start…", None)
        with _load_errors(f"the model in {folder}{hint}"):
            packed = fast_start.write_packed(model, folder, spec.dtype, spec.device)
        return (model if packed is None else packed), tokenizer
    report("Loading tokenizer…", None)
    with _load_errors(f"the tokenizer in {folder}{hint}"):
        tokenizer = fast_start.own_tokenizer(folder)
        if tokenizer is None:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(folder, **NO_REMOTE)
    report("Loading model…", None)
    return weights, tokenizer


def _load_gguf(path: Path, spec: ModelSpec, report: Progress):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    report("Loading tokenizer…", None)
    with _load_errors(f"the GGUF file {path}"):
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name, **NO_REMOTE)
    report("Loading model…", None)
    with _load_errors(f"the GGUF file {path}"), no_gguf_progress_bar():
        model = AutoModelForCausalLM.from_pretrained(
            path.parent,
            gguf_file=path.name,
            dtype=getattr(torch, spec.dtype),
            **NO_REMOTE,
            **_placement(spec.device),
        )
    return model, tokenizer


def _placement(device: str) -> dict[str, Any]:
    # device_map puts weights straight onto the GPU instead of staging them in host RAM.
    return {} if device == "cpu" else {"device_map": device}


def _resolve(source: str) -> tuple[Path, bool]:
    """(path, is_gguf) for a user-given source, or a ModelLoadError saying what is wrong."""
    path = Path(source).expanduser().resolve()
    if not path.exists():
        raise ModelLoadError(
            f"No model at {path}: the path does not exist. Choose a model folder or a .gguf file."
        )
    if not path.is_dir() and not stat.S_ISREG(path.stat().st_mode):  # a pipe or a device: opening may never return
        raise ModelLoadError(f"{path} is not a model: it is a device or a pipe, not a file or a folder. "
                             "Choose a Hugging Face model folder (with config.json) or a .gguf file.")
    if path.is_file() and path.name == "config.json":
        path = path.parent
    if path.is_dir():
        if (path / "config.json").is_file():
            return path, False
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1:
            return ggufs[0], True
        if ggufs:
            names = ", ".join(p.name for p in ggufs)
            raise ModelLoadError(f"The folder {path} holds several GGUF files ({names}); choose one of them.")
        raise ModelLoadError(
            f"{path} is not a model folder: it has no config.json. Choose a Hugging Face model "
            "folder (config.json, tokenizer and *.safetensors) or a .gguf file."
        )
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise ModelLoadError(f"Cannot read {path}: {exc.strerror or exc}.") from exc
    if magic == b"GGUF":
        return path, True
    if path.suffix.lower() == ".gguf":
        raise ModelLoadError(
            f"{path} is not a valid GGUF file: it does not start with the GGUF header. "
            "It may be corrupt or incompletely downloaded."
        )
    raise ModelLoadError(
        f"{path} is not a model. Choose a Hugging Face model folder (with config.json) or a .gguf file."
    )


def read_config(folder: Path) -> Any:
    """A model folder's config.json, read only when it is a regular file of at most 4 MB (OSError
    or ValueError with the reason otherwise: a huge or endless file is not read into memory)."""
    return load_json(folder / "config.json", MAX_CONFIG_BYTES)


def _check_folder(folder: Path, vision: bool = False) -> None:
    """Fail early, with a precise message, on folders that cannot hold a loadable causal LM (or,
    with `vision`, an image-text-to-text model and its processor)."""
    try:
        config = read_config(folder)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(
            f"{folder / 'config.json'} is not readable JSON ({exc}); the model folder is damaged."
        ) from exc
    if not isinstance(config, dict):
        raise ModelLoadError(f"{folder / 'config.json'} is not a model configuration.")
    if not vision:
        _check_architecture(config.get("model_type"), "auto_map" in config, folder)
    if not any(folder.glob("*.safetensors")) and not any(folder.glob("*.bin")):
        raise ModelLoadError(
            f"{folder} has a config.json but no weights (*.safetensors); the model is incomplete."
        )
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise ModelLoadError(
            f"{folder} has no tokenizer (tokenizer.json); copy the tokenizer files of the model into it."
        )
    if vision and not any((folder / name).is_file() for name in PROCESSOR_FILES):
        raise ModelLoadError(
            f"{folder} holds a vision-language model but no image processor (preprocessor_config.json); "
            "copy the processor files of the model into it."
        )


def _check_architecture(model_type: Any, custom_code: bool, folder: Path) -> None:
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    if not isinstance(model_type, str) or not model_type:
        raise ModelLoadError(f"{folder / 'config.json'} names no model_type; this is not a supported model.")
    if model_type not in CONFIG_MAPPING_NAMES:
        extra = " It needs custom code, which Omnidesk does not run." if custom_code else ""
        raise ModelLoadError(
            f"Unsupported architecture {model_type!r} in {folder}: transformers "
            f"{transformers.__version__} does not know it.{extra} Choose another model."
        )
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise ModelLoadError(
            f"Unsupported architecture {model_type!r} in {folder}: it is not a text-generation "
            "(causal language) model."
        )


def _check_device(device: str) -> None:
    if device == "cpu":
        return
    import torch

    if not torch.cuda.is_available():
        build = " (this torch is a CPU-only build)" if torch.version.cuda is None else ""
        raise ModelLoadError(
            f"Device {device!r} was requested but CUDA is not available{build}. Use device cpu."
        )
    index, count = int(device.partition(":")[2] or 0), torch.cuda.device_count()
    if index >= count:
        raise ModelLoadError(f"Device {device!r} does not exist: this machine has {count} CUDA device(s).")
