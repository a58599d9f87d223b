"""Images in messages and vision-language models (issue 11, part 1): checked image bytes, image
parts in messages (hash covers the bytes), the chat template's image positions, and loading a
VLM folder through the same path a user's model takes (saved from the tiny VLM built in code)."""

from __future__ import annotations

import base64
import io
import shutil
import zlib
from pathlib import Path

import pytest
import torch

from desktop.errors import InvalidRequest, ModelLoadError
from desktop.model.images import MAX_IMAGE_BYTES, MAX_IMAGES, ImageData, image_spans
from desktop.model.loader import ModelSpec, load_model
from desktop.model.messages import Message, parse_messages, prefix_hashes


def png(color=(10, 20, 30), size=(20, 10), fmt="PNG") -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, fmt)
    return buf.getvalue()


# ---------------------------------------------------------------- image bytes


def test_image_bytes_are_checked_and_keyed_by_their_hash():
    a, b = ImageData.from_bytes(png()), ImageData.from_bytes(png((10, 20, 31)))
    assert (a.mime, a.width, a.height) == ("image/png", 20, 10)
    assert a == ImageData.from_bytes(png()) and a != b and a.key != b.key
    assert a.key < 0 and b.key < 0  # never a token id
    jpeg = ImageData.from_bytes(png(fmt="JPEG"))
    assert jpeg.mime == "image/jpeg" and jpeg.pil().size == (20, 10)
    assert ImageData.from_data_url(a.data_url()) == a


@pytest.mark.parametrize("data, words", [
    (b"", "empty"),
    (b"hello, not an image", "not an image"),
    (png((1, 2, 3), (64, 64))[:-30], "damaged"),
    (b"\0" * (MAX_IMAGE_BYTES + 1), "limit is 20 MB"),
])
def test_bad_image_bytes_are_refused_clearly(data, words):
    with pytest.raises(InvalidRequest, match=words):
        ImageData.from_bytes(data)


def test_a_decompression_bomb_is_refused():
    """A PNG header that claims 10,000 × 10,000 pixels: refused from the header, never decoded."""
    import struct

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = chunk(b"IHDR", struct.pack(">IIBBBBB", 10_000, 10_000, 8, 2, 0, 0, 0))
    bomb = b"\x89PNG\r\n\x1a\n" + header + chunk(b"IDAT", zlib.compress(b"\0" * 1000)) + chunk(b"IEND", b"")
    with pytest.raises(InvalidRequest, match="megapixels|not an image"):
        ImageData.from_bytes(bomb)


def test_data_urls():
    with pytest.raises(InvalidRequest, match="not fetched"):
        ImageData.from_data_url("https://example.com/cat.png")
    with pytest.raises(InvalidRequest, match="base64"):
        ImageData.from_data_url("data:image/png,rawbytes")
    with pytest.raises(InvalidRequest, match="not valid base64"):
        ImageData.from_data_url("data:image/png;base64,@@@")


# ---------------------------------------------------------------- messages


def test_image_parts_parse_in_every_shape_and_images_come_first():
    raw = png()
    url = "data:image/png;base64," + base64.b64encode(raw).decode()
    msgs = parse_messages([{"role": "user", "content": [
        {"type": "text", "text": "what "}, {"type": "image_url", "image_url": {"url": url}},
        {"type": "text", "text": "is this?"}, {"type": "image", "image": raw}]}])
    assert msgs[0].content == "what is this?" and len(msgs[0].images) == 2
    assert msgs[0].images[0] == msgs[0].images[1] == ImageData.from_bytes(raw)
    assert parse_messages(msgs) == msgs  # Messages pass through, checked again


def test_images_only_in_user_messages_and_a_limit_on_count():
    image = {"type": "image", "image": png()}
    with pytest.raises(InvalidRequest, match="Only user messages"):
        parse_messages([{"role": "assistant", "content": [image]}])
    with pytest.raises(InvalidRequest, match="Only user messages"):
        Message("system", "x", (ImageData.from_bytes(png()),))
    with pytest.raises(InvalidRequest, match=f"limit is {MAX_IMAGES}"):
        parse_messages([{"role": "user", "content": [image] * (MAX_IMAGES + 1)}])
    with pytest.raises(InvalidRequest, match="Image 1 of message 1 is not an image"):
        parse_messages([{"role": "user", "content": [{"type": "image", "image": b"nope"}]}])


def test_the_message_hash_covers_the_image_bytes():
    a, b = ImageData.from_bytes(png()), ImageData.from_bytes(png((0, 0, 1)))
    with_a, with_b, text = Message("user", "look", (a,)), Message("user", "look", (b,)), Message("user", "look")
    assert len({prefix_hashes([m])[0] for m in (with_a, with_b, text)}) == 3
    assert prefix_hashes([Message("user", "look", (ImageData.from_bytes(png()),))]) == prefix_hashes([with_a])


# ---------------------------------------------------------------- the tiny VLM and its template


@pytest.fixture(scope="module")
def vlm():
    return load_model(ModelSpec("tiny-vlm"))


def test_the_tiny_vlm_takes_images_and_the_text_model_does_not(vlm):
    assert vlm.supports_images and vlm.name == "omnidesk-tiny-vlm"
    assert not load_model(ModelSpec("tiny")).supports_images


def test_template_expands_each_image_to_its_positions(vlm):
    t = vlm.template
    a, b = ImageData.from_bytes(png()), ImageData.from_bytes(png((1, 2, 3), (64, 64)))
    msgs = [Message("system", "s"), Message("user", "two <image> pictures", (a, b)), Message("assistant", "ok"),
            Message("user", "again", (a,))]
    enc = t.encode(msgs)
    spans = image_spans(enc.ids)
    assert [(s.key, s.length) for s in spans] == [(a.key, 16), (b.key, 16), (a.key, 16)]
    assert enc.bounds[0] < spans[0].start < spans[1].end < enc.bounds[1] < enc.bounds[2] < spans[2].start
    # the text "<image>" the user typed is text, never an image position
    assert sum(1 for x in enc.ids if x == vlm.vision.placeholder_id) == 0
    assert t.encode(msgs[:2]).ids == enc.ids[: enc.bounds[1]]  # chunks: a prefix's ids are a prefix
    assert enc.ids[enc.bounds[1] :] == t.encode_delta(msgs[:2], msgs[2:]).ids


def test_the_uncached_forward_of_the_tiny_vlm_sees_the_image(vlm):
    """Two images give different next-token logits after the same text (the image reaches the model)."""
    def last_logits(image):
        msgs = [Message("user", "what is it?", (image,))]
        ids = [vlm.vision.placeholder_id if x < 0 else x for x in vlm.template.prompt_ids(msgs)]
        extra = vlm.vision.model_inputs([image], "cpu", torch.float32)
        with torch.no_grad():
            return vlm.model(input_ids=torch.tensor([ids]), **extra).logits[0, -1]

    a, b = last_logits(ImageData.from_bytes(png())), last_logits(ImageData.from_bytes(png((250, 250, 0))))
    assert (a - b).abs().max() > 1e-3


# ---------------------------------------------------------------- loading a VLM folder


@pytest.fixture(scope="module")
def vlm_folder(tmp_path_factory) -> Path:
    from desktop.model.tiny_vlm import tiny_vlm

    folder = tmp_path_factory.mktemp("vlm") / "tiny-llava"
    model, processor = tiny_vlm()
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def test_a_vlm_folder_loads_through_the_processor(vlm_folder, vlm):
    stages = []
    lm = load_model(ModelSpec(str(vlm_folder)), lambda stage, fraction: stages.append(stage))
    assert lm.supports_images and "Loading processor…" in stages
    image = ImageData.from_bytes(png())
    msgs = [Message("user", "describe", (image,))]
    assert lm.template.prompt_ids(msgs) == vlm.template.prompt_ids(msgs)
    ids = torch.tensor([[lm.vision.placeholder_id if x < 0 else x for x in lm.template.prompt_ids(msgs)]])
    with torch.no_grad():
        got = lm.model(input_ids=ids, **lm.vision.model_inputs([image], "cpu", torch.float32)).logits
        want = vlm.model(input_ids=ids, **vlm.vision.model_inputs([image], "cpu", torch.float32)).logits
    assert torch.allclose(got, want, atol=1e-5)


def test_a_vlm_folder_without_its_processor_is_refused(vlm_folder, tmp_path):
    broken = tmp_path / "no-processor"
    shutil.copytree(vlm_folder, broken)
    for name in ("preprocessor_config.json", "processor_config.json"):
        (broken / name).unlink(missing_ok=True)
    with pytest.raises(ModelLoadError, match="no image processor"):
        load_model(ModelSpec(str(broken)))


def test_a_qwen2vl_folder_loads_without_torchvision(tmp_path):
    """A Qwen2-VL folder as published (its processor wants a torchvision video processor, which
    this app does not install) loads with the image side of its processor only; same ids and
    logits as the model it was saved from."""
    import json

    from desktop.model.tiny_qwen2vl import tiny_qwen2vl

    model, processor = tiny_qwen2vl()
    folder = tmp_path / "tiny-qwen2-vl"
    model.save_pretrained(folder)
    processor.tokenizer.save_pretrained(folder)
    processor.image_processor.save_pretrained(folder)
    config = json.loads((folder / "preprocessor_config.json").read_text())
    (folder / "preprocessor_config.json").write_text(json.dumps({**config, "image_processor_type": "Qwen2VLImageProcessor"}))
    lm = load_model(ModelSpec(str(folder)))
    assert lm.vision.mrope and "ImagesOnly" in type(lm.vision.processor).__name__
    image = ImageData.from_bytes(png(size=(40, 30)))
    msgs = [Message("user", "describe", (image,))]
    ids = lm.template.prompt_ids(msgs)
    assert ids.count(image.key) == lm.vision.grid(image).length == 20
    tensor = torch.tensor([[lm.vision.placeholder_id if x < 0 else x for x in ids]])
    inputs = lm.vision.model_inputs([image], "cpu", torch.float32)
    pos, _ = lm.model.model.get_rope_index(tensor, (tensor == lm.vision.placeholder_id).int(), inputs["image_grid_thw"])
    with torch.no_grad():
        got = lm.model(input_ids=tensor, position_ids=pos, **inputs).logits
        want = model(input_ids=tensor, position_ids=pos, **inputs).logits
    assert torch.allclose(got, want, atol=1e-5)


def test_images_cross_the_worker_process_pipe_intact():
    import pickle

    msg = parse_messages([{"role": "user", "content": [{"type": "image", "image": png()}, {"type": "text", "text": "hi"}]}])[0]
    back = pickle.loads(pickle.dumps(msg))
    assert back == msg and back.images[0].data == png() and prefix_hashes([back]) == prefix_hashes([msg])


class _Processor:
    """A processor whose image expansion is `runs` (placeholder 5 between other ids): stands in
    for architectures that tile an image (Idefics3), to check the refusal at load."""

    image_processor = object()

    def __init__(self, runs):
        self.runs = runs

    def __call__(self, text, images, return_tensors, add_special_tokens):
        return {"input_ids": torch.tensor([self.runs]), "pixel_values": torch.zeros(1, 3, 4, 4)}


def test_models_that_split_an_image_are_refused_at_load():
    from desktop.model.vision import Vision

    with pytest.raises(ModelLoadError, match="splits an image into 2 pieces"):
        Vision(_Processor([5, 5, 1, 5, 5]), placeholder_id=5, image_token="<image>", name="tiled")
    assert Vision(_Processor([2, 5, 5, 5, 3]), placeholder_id=5, image_token="<image>").prepare(
        ImageData.from_bytes(png())).positions == 5  # markers around one run are fine

    class NoImages:
        image_processor = None

    with pytest.raises(ModelLoadError, match="no image processor"):
        Vision.from_processor(NoImages(), object(), "half a model")


def test_qwen2vl_loads_with_m_rope_positions_checked_against_its_own_rope_index():
    """The tiny Qwen2-VL loads as an M-RoPE vision model (its 3-D indices equal get_rope_index's on
    the load probe); a model whose M-RoPE rule differs is refused with a clear message."""
    from desktop.model.mrope import Grid
    from desktop.model.tiny_qwen2vl import tiny_qwen2vl
    from desktop.model.vision import Vision

    lm = load_model(ModelSpec("tiny-qwen2vl"))
    assert lm.supports_images and lm.vision.mrope and lm.name == "omnidesk-tiny-qwen2vl"
    image = ImageData.from_bytes(png(size=(64, 20)))
    assert lm.vision.grid(image) == Grid(1, 2, 8)  # 16×64 pixels after resizing: 2 × 8 positions, advance 8
    assert lm.vision.prepare(image).positions == 16

    model, processor = tiny_qwen2vl()
    rule = model.model.get_rope_index

    def other_rule(*args, **kwargs):  # plain 1-D positions, images included
        pos, deltas = rule(*args, **kwargs)
        return torch.arange(pos.shape[-1]).expand_as(pos), deltas

    model.model.get_rope_index = other_rule
    with pytest.raises(ModelLoadError, match="M-RoPE"):
        Vision.from_processor(processor, model.config, "another-mrope", model)


def test_a_truncated_jpeg_is_refused_when_attached():
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray((torch.rand(64, 64, 3) * 255).to(torch.uint8).numpy()).save(buf, "JPEG")
    with pytest.raises(InvalidRequest, match="damaged"):
        ImageData.from_bytes(buf.getvalue()[:-100])


def test_stored_images_are_read_once_until_they_change(tmp_path):
    from desktop.model.images import read_image

    path = tmp_path / "a.png"
    path.write_bytes(png())
    first = read_image(path)
    assert read_image(path) is first  # history re-sent each turn: not decoded again
    import os

    path.write_bytes(png((1, 1, 1)))
    os.utime(path, ns=(first_ns := path.stat().st_mtime_ns + 10**9, first_ns))
    assert read_image(path) != first
    path.unlink()
    with pytest.raises(InvalidRequest, match="missing"):
        read_image(path)
