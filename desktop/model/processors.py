"""Vision processors without their video half.

Some VLM processors (Qwen2-VL and its kin) are built with a video processor that needs
torchvision, which this app does not install (it sends no video). `images_only(cls)` is the
processor class taking just an image processor and a tokenizer; `load_images_only` builds one
from a model folder when the full processor cannot be loaded for want of such a library."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any


def images_only(cls: type) -> type:
    """`cls` (a ProcessorMixin subclass) without its video processor; `cls` itself if it has none."""
    if "video_processor" not in inspect.signature(cls.__init__).parameters:
        return cls

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        cls.__init__(self, image_processor, tokenizer, None, chat_template=chat_template, **kwargs)

    # ProcessorMixin reads its parts from the __init__ signature: image processor and tokenizer only
    return type(f"{cls.__name__}ImagesOnly", (cls,), {"__init__": __init__, "__module__": __name__})


def load_images_only(folder: Path, model_type: str) -> Any:
    """The images-only processor of the folder's model type (its tokenizer, image processor and
    chat template from the folder; nothing downloaded, no code from the folder run); ValueError
    where the type has no processor class."""
    import transformers
    from transformers import AutoImageProcessor, AutoTokenizer
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES

    name = PROCESSOR_MAPPING_NAMES.get(model_type)
    cls = getattr(transformers, name, None) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f"no processor class for model type {model_type!r}")
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    images = AutoImageProcessor.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    template = getattr(tokenizer, "chat_template", None)
    saved = folder / "chat_template.json"  # the processor's template, in the older file
    if not template and saved.is_file():
        template = json.loads(saved.read_text(encoding="utf-8")).get("chat_template")
    return images_only(cls)(image_processor=images, tokenizer=tokenizer, chat_template=template)
