"""Images at the door of a request: counted before any is decoded, then checked (header first) and
decoded into ImageData by `decode_images`, which callers on an event loop run on a thread."""

from __future__ import annotations

from typing import Any, Iterable

from desktop.errors import InvalidRequest
from desktop.model.images import MAX_IMAGES, ImageData, image_part

IMAGE_PARTS = ("image", "image_url", "input_image")


def image_parts(content: Any) -> list[dict[str, Any]]:
    """The image parts of one message's content (none for text or anything malformed)."""
    if not isinstance(content, (list, tuple)):
        return []
    return [p for p in content if isinstance(p, dict) and p.get("type") in IMAGE_PARTS]


def count_images(messages: Iterable[Any]) -> int:
    """How many images the messages carry (dicts or Messages), without decoding any."""
    n = 0
    for m in messages:
        if isinstance(m, dict):
            n += len(image_parts(m.get("content")))
        else:
            n += len(getattr(m, "images", ()) or ())
    return n


def check_count(messages: Iterable[Any]) -> None:
    """InvalidRequest when the messages carry more images than a request may: counted, not decoded."""
    count = count_images(messages)
    if count > MAX_IMAGES:
        raise InvalidRequest(f"The conversation holds {count} images; the limit is {MAX_IMAGES}. "
                             "Start a new conversation for more.")


def decode_images(messages: list[Any]) -> list[Any]:
    """The messages with every image part replaced by a checked {"type": "image", "image":
    ImageData}: the count first, then each image's size, its header's dimensions and shape, then
    its pixels. Slow for big images (tens of ms each): run it off the event loop. InvalidRequest
    names the first image refused; what is not a dict with a content list is passed on as it is."""
    check_count(messages)
    out: list[Any] = []
    for i, m in enumerate(messages):
        content = m.get("content") if isinstance(m, dict) else None
        if not image_parts(content):
            out.append(m)
            continue
        parts, n = [], 0
        for p in content:
            if isinstance(p, dict) and p.get("type") in IMAGE_PARTS:
                n += 1
                if p.get("type") == "input_image":  # the Responses API's name for an image part
                    p = {"type": "image_url", "image_url": p.get("image_url")}
                p = {"type": "image", "image": image_part(p, f"Image {n} of message {i + 1}")}
            parts.append(p)
        out.append({**m, "content": parts})
    return out
