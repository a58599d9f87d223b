"""The cache invariant with images (issue 11, part 3): on the tiny VLMs (LLaVA-style, and
Qwen2-VL with M-RoPE: 3-D rotary positions for image tokens; fp32, greedy), output with the KV
cache equals an uncached run over random conversations with images at random turns, edits and
regenerations, integrity checked every step; and the vision tower runs once per image in a slot
(a text follow-up does not encode the image again)."""

from __future__ import annotations

import io

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from worker_helpers import chat, greedy, make_client, request_for, run_all

from desktop.model.images import ImageData, safe_cut
from desktop.model.loader import ModelSpec, load_model
from desktop.model.messages import Message
from desktop.protocol import Chat, Done, ErrorEvent, MatchKind
from desktop.model.params import SamplingParams

MAX = 5


def make_image(seed: int, size: tuple[int, int] = (40, 30), fmt: str = "PNG") -> ImageData:
    """A small image drawn from `seed` (blocks of colour), encoded as `fmt`."""
    from PIL import Image

    gen = torch.Generator().manual_seed(seed)
    w, h = size
    pixels = (torch.rand((h // 5 + 1, w // 5 + 1, 3), generator=gen) * 255).to(torch.uint8)
    img = Image.fromarray(pixels.numpy()).resize((w, h), Image.NEAREST)
    buf = io.BytesIO()
    img.save(buf, fmt)
    return ImageData.from_bytes(buf.getvalue())


IMAGES = [make_image(i, size) for i, size in enumerate([(40, 30), (32, 32), (64, 20), (25, 50)])]


class VisionOracle:
    """Greedy generation with no cache reuse: the canonical ids of the whole prompt in one
    forward, the image positions as the model's image token and every image's pixels from the
    processor itself (not the worker's Vision), every time. An M-RoPE model gets the position
    ids of its own get_rope_index over the whole prompt, and decode steps that position plus
    the prompt's rope delta (explicitly: never the delta the model keeps on itself)."""

    def __init__(self, lm) -> None:
        self.lm = lm
        self.memo: dict[tuple, list[int]] = {}

    def chat(self, msgs: list[Message], max_tokens: int) -> list[int]:
        return self.ids(self.lm.template.prompt_ids(msgs), [im for m in msgs for im in m.images], max_tokens)

    @torch.no_grad()
    def ids(self, prompt: list[int], images: list[ImageData], max_tokens: int) -> list[int]:
        """Greedy tokens after `prompt` (image runs as negative keys), `images` in their order."""
        key = (tuple(prompt), max_tokens)
        if key in self.memo:
            return self.memo[key]
        model, vision = self.lm.model, self.lm.vision
        ids = torch.tensor([[model.config.image_token_id if t < 0 else t for t in prompt]])
        extra, delta = {}, 0
        if images:
            pixels = vision.processor.image_processor([im.pil() for im in images], return_tensors="pt")
            extra = {k: v for k, v in pixels.items() if k in ("pixel_values", "image_grid_thw")}
        if vision.mrope:
            pos, deltas = model.model.get_rope_index(ids, mm_token_type_ids=(ids == model.config.image_token_id).int(),
                                                     image_grid_thw=extra.get("image_grid_thw"))
            extra["position_ids"], delta = pos, int(deltas[0, 0])
        from desktop.model import kv

        cache = kv.new_cache(model.config)
        logits = model(input_ids=ids, past_key_values=cache, use_cache=True, **extra).logits[0, -1]

        def step(token: int):
            more = {"position_ids": torch.full((3, 1, 1), kv.cache_len(cache) + delta)} if vision.mrope else {}
            return model(input_ids=torch.tensor([[token]]), past_key_values=cache, use_cache=True, **more).logits[0, -1]

        self.memo[key] = out = greedy(logits, step, self.lm.template.eos_ids, max_tokens)
        return out


@pytest.fixture(scope="module")
def vlm():
    return load_model(ModelSpec("tiny-vlm"))


@pytest.fixture(scope="module")
def vlm_oracle(vlm):
    return VisionOracle(vlm)


@pytest.fixture(scope="module")
def qwen2vl():
    return load_model(ModelSpec("tiny-qwen2vl"))


@pytest.fixture(scope="module")
def qwen2_5vl():
    from desktop.model.loader import assemble
    from desktop.model.tiny_qwen2vl import tiny_qwen2vl

    model, processor = tiny_qwen2vl(v2_5=True)
    return assemble(model, processor.tokenizer, "tiny-qwen2.5-vl", "cpu", "float32", processor)


def _with_oracle(request, name: str):
    """(model, oracle) by fixture name, one oracle per model in the module (its memo shared)."""
    oracles = request.getfixturevalue("oracles")
    lm = request.getfixturevalue(name)
    if name not in oracles:
        oracles[name] = VisionOracle(lm)
    return lm, oracles[name]


@pytest.fixture(scope="module")
def oracles():
    return {}


@pytest.fixture(scope="module", params=["vlm", "qwen2vl", "qwen2_5vl"])
def each_vlm(request):
    """(model, oracle) of each architecture: LLaVA-style, then M-RoPE (Qwen2-VL, Qwen2.5-VL)."""
    return _with_oracle(request, request.param)


@pytest.fixture(scope="module", params=["qwen2vl", "qwen2_5vl"])
def mrope_vlm(request):
    """(model, oracle) of each M-RoPE architecture: Qwen2-VL, then Qwen2.5-VL (same positions,
    a windowed vision tower)."""
    lm, oracle = _with_oracle(request, request.param)
    assert lm.vision.mrope
    return lm, oracle


@pytest.fixture
def tower_calls(vlm):
    """How many images the vision tower encoded (a forward hook on it counts its batch)."""
    calls = [0]

    def count(module, args, kwargs, output):
        pixels = kwargs.get("pixel_values", args[0] if args else None)
        calls[0] += pixels.shape[0]

    handle = vlm.model.model.vision_tower.register_forward_hook(count, with_kwargs=True)
    yield calls
    handle.remove()


TEXT = st.text(alphabet=list("abcdefgh ij.?é<>image"), min_size=1, max_size=20)
PICS = st.lists(st.integers(0, len(IMAGES) - 1), min_size=0, max_size=2)
OPS = st.one_of(
    st.tuples(st.just("turn"), st.integers(0, 1), TEXT, PICS),
    st.tuples(st.just("regen"), st.integers(0, 1)),
    st.tuples(st.just("edit"), st.integers(0, 1), st.integers(0, 9), TEXT, PICS),
    st.tuples(st.just("system"), st.integers(0, 1), TEXT),
    st.tuples(st.just("both"), TEXT, PICS, TEXT, PICS),  # a turn in each conversation at once: they decode as one batch
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(mode=st.sampled_from(["imc+spc", "imc", "off"]), num_slots=st.integers(1, 3), ops=st.lists(OPS, min_size=1, max_size=7),
       chunk=st.sampled_from([8, 16, 64]))
def test_cached_equals_uncached_with_images(vlm, vlm_oracle, mode, num_slots, ops, chunk):
    cached_equals_uncached(vlm, vlm_oracle, mode, num_slots, ops, chunk)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(mode=st.sampled_from(["imc+spc", "imc", "off"]), num_slots=st.integers(1, 3), ops=st.lists(OPS, min_size=1, max_size=7),
       chunk=st.sampled_from([8, 16, 64]))
def test_cached_equals_uncached_with_images_m_rope(mrope_vlm, mode, num_slots, ops, chunk):
    """The same on the M-RoPE models: every image's positions, and the text after it, as the
    model's get_rope_index gives them for the whole prompt, whatever was cached or batched."""
    cached_equals_uncached(*mrope_vlm, mode, num_slots, ops, chunk)


DISK_OPS = st.one_of(OPS, st.tuples(st.just("restart"), st.booleans()))  # True: a clean Shutdown; False: the process died


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(num_slots=st.integers(1, 2), ops=st.lists(DISK_OPS, min_size=1, max_size=7), chunk=st.sampled_from([8, 64]))
def test_cached_equals_uncached_with_images_across_disk_and_restarts(request, tmp_path_factory, num_slots, ops, chunk):
    """With the disk tier: conversations with images leave RAM (few slots, restarts of the worker
    at random points) and come back from their snapshots — image spans and M-RoPE places
    included — with output equal to the uncached run, on the LLaVA-style and the M-RoPE model."""
    for name in ("vlm", "qwen2vl"):
        lm, oracle = _with_oracle(request, name)
        cached_equals_uncached(lm, oracle, "imc+spc", num_slots, ops, chunk, kv_dir=str(tmp_path_factory.mktemp("kv")))


def cached_equals_uncached(vlm, vlm_oracle, mode, num_slots, ops, chunk, kv_dir: str = "") -> None:
    config = dict(num_slots=num_slots, cache_mode=mode, cache_min_tokens=8, prefill_chunk=chunk,
                  prefill_budget=chunk + 8, runner="auto", kv_dir=kv_dir)
    client = make_client(vlm, **config)
    convs: list[list[Message]] = [[Message("system", "You are a helpful assistant.")], []]
    pictures = lambda picked: [IMAGES[i] for i in picked]  # noqa: E731
    for n, op in enumerate(ops):
        if op[0] == "restart":
            if op[1]:
                client.worker.close()
            client = make_client(vlm, **config)
            continue
        if op[0] == "both":
            requests = [request_for(("turn", i, *op[1 + 2 * i : 3 + 2 * i]), convs[i], pictures=pictures) for i in (0, 1)]
            events = run_all(client, [Chat(f"r{n}.{i}", tuple(m), SamplingParams(max_tokens=MAX)) for i, m in enumerate(requests)])
            for i, msgs in enumerate(requests):
                done = events[f"r{n}.{i}"][-1]
                assert isinstance(done, Done), done
                assert list(done.token_ids) == vlm_oracle.chat(msgs, MAX), (mode, op, i, done.stats)
                convs[i].append(Message("assistant", done.text))
            continue
        conv = convs[op[1]]
        msgs = request_for(op, conv, pictures=pictures)
        done = chat(client, f"r{n}", msgs, MAX)
        assert list(done.token_ids) == vlm_oracle.chat(msgs, MAX), (mode, op, done.stats)
        conv.append(Message("assistant", done.text))
    if kv_dir:
        client.worker.close()


@pytest.mark.parametrize("name", ["vlm", "qwen2vl"])
def test_an_image_conversation_comes_back_from_disk_after_a_restart(request, tmp_path, name):
    """Deterministic companion of the property test above: a conversation with an image, the
    worker shut down (its snapshot written) and started again: the next turn is restored from
    disk — image spans and M-RoPE places included — and equals the uncached run."""
    lm, oracle = _with_oracle(request, name)
    config = dict(num_slots=1, cache_min_tokens=8, prefill_chunk=64, prefill_budget=72, runner="auto", kv_dir=str(tmp_path))
    client = make_client(lm, **config)
    conv = [Message("system", "You are a helpful assistant."), Message("user", "What is in this picture?", images=(IMAGES[0],))]
    conv.append(Message("assistant", chat(client, "a", conv, MAX).text))
    client.worker.close()
    client = make_client(lm, **config)
    msgs = conv + [Message("user", "and the colours?")]
    done = chat(client, "b", msgs, MAX)
    assert done.stats.kind == MatchKind.DISK and done.stats.cached_tokens > 0, done.stats
    assert list(done.token_ids) == oracle.chat(msgs, MAX)
    client.worker.close()


def test_text_follow_up_does_not_encode_the_image_again(vlm, vlm_oracle, tower_calls):
    client = make_client(vlm, num_slots=2, prefill_chunk=8, prefill_budget=16)
    msgs = [Message("user", "What is this?", (IMAGES[0],))]
    first = chat(client, "a", msgs, MAX)
    assert tower_calls[0] == 1 and first.stats.kind == MatchKind.MISS.value
    second_msgs = msgs + [Message("assistant", first.text), Message("user", "Tell me more.")]
    done = chat(client, "b", second_msgs, MAX)
    assert tower_calls[0] == 1, "the vision tower ran again for a text follow-up"
    assert done.stats.kind == MatchKind.EXTEND.value and done.stats.cached_tokens > 16
    third_msgs = second_msgs + [Message("assistant", done.text), Message("user", "And this one?", (IMAGES[1],))]
    third = chat(client, "c", third_msgs, MAX)  # an image mid-conversation: only it and the new text are computed
    assert tower_calls[0] == 2 and third.stats.kind == MatchKind.EXTEND.value
    bounds = vlm.template.encode(third_msgs).bounds  # all but the new message (the reply as far as its text re-tokenises alike)
    assert bounds[-3] < third.stats.cached_tokens <= bounds[-2]
    slot = client.worker.scheduler.table.slots[third.stats.slot]
    assert [(s.key, s.length) for s in slot.images] == [(IMAGES[0].key, 16), (IMAGES[1].key, 16)]
    for m, d in ((msgs, first), (second_msgs, done), (third_msgs, third)):  # the oracle runs the tower too: last
        assert list(d.token_ids) == vlm_oracle.chat(m, MAX)


def test_qwen2vl_follow_ups_extend_the_kv_with_image_places_recorded(qwen2vl):
    """M-RoPE: a text follow-up reuses the image's KV (the vision tower does not run again) and
    continues from the image's rope delta; the slot records each image's positions; two slots
    with different deltas decode as one batch; the model's own `rope_deltas` (one per model,
    wrong across slots) is never set."""
    oracle, calls = VisionOracle(qwen2vl), [0]
    handle = qwen2vl.model.model.visual.register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    try:
        client = make_client(qwen2vl, num_slots=2, prefill_chunk=8, prefill_budget=16)
        msgs = [Message("user", "What is this?", (IMAGES[0],))]
        first = chat(client, "a", msgs, MAX)
        second_msgs = msgs + [Message("assistant", first.text), Message("user", "Tell me more.")]
        second = chat(client, "b", second_msgs, MAX)
        assert calls[0] == 1 and second.stats.kind == MatchKind.EXTEND.value
        third_msgs = second_msgs + [Message("assistant", second.text), Message("user", "And this?", (IMAGES[2],))]
        third = chat(client, "c", third_msgs, MAX)
        assert calls[0] == 2 and third.stats.kind == MatchKind.EXTEND.value
        slot = client.worker.scheduler.table.slots[third.stats.slot]
        grids = [qwen2vl.vision.grid(IMAGES[0]), qwen2vl.vision.grid(IMAGES[2])]
        assert [(s.key, s.length) for s in slot.images] == [(IMAGES[0].key, grids[0].length), (IMAGES[2].key, grids[1].length)]
        track = client.worker.runner.tracks[third.stats.slot]
        assert [(p.start, p.length, p.advance) for p in track.spans] == [(s.start, g.length, g.advance) for s, g in zip(slot.images, grids)]
        assert track.delta() == sum(g.advance - g.length for g in grids) < 0
        # two conversations whose images leave different rope deltas decode as one batch, each row its own
        pair = [third_msgs + [Message("assistant", third.text), Message("user", "Compare them.")],
                [Message("user", "Now this one.", (IMAGES[3],))]]
        events = run_all(client, [Chat(f"d{i}", tuple(m), SamplingParams(max_tokens=8)) for i, m in enumerate(pair)])
        together = [events[f"d{i}"][-1] for i in (0, 1)]
        assert all(isinstance(d, Done) for d in together), together
        assert qwen2vl.model.model.rope_deltas is None
        assert qwen2vl.vision.grid(IMAGES[3]).advance - qwen2vl.vision.grid(IMAGES[3]).length != track.delta()
    finally:
        handle.remove()
    for m, d, n in ((msgs, first, MAX), (second_msgs, second, MAX), (third_msgs, third, MAX), *zip(pair, together, (8, 8))):
        assert list(d.token_ids) == oracle.chat(m, n)


def test_a_new_image_in_the_history_rebuilds_from_where_it_differs(vlm, vlm_oracle, tower_calls):
    client = make_client(vlm, num_slots=1, prefill_chunk=64, prefill_budget=64)
    head = [Message("system", "Be brief."), Message("user", "first", (IMAGES[0],)), Message("assistant", "ok")]
    chat(client, "a", head + [Message("user", "look", (IMAGES[1],))], MAX)
    assert tower_calls[0] == 2
    msgs = head + [Message("user", "look", (IMAGES[2],))]  # the same text, another image
    b = chat(client, "b", msgs, MAX)
    assert tower_calls[0] == 3, "only the new image is encoded"
    before_image = vlm.template.prompt_ids(msgs).index(IMAGES[2].key)
    assert b.stats.cached_tokens == before_image  # everything up to the image that differs
    assert list(b.token_ids) == vlm_oracle.chat(msgs, MAX)


SESSION_OPS = st.lists(
    st.one_of(st.tuples(st.just("append"), TEXT, PICS), st.tuples(st.just("generate"), st.integers(1, 6)),
              st.tuples(st.just("truncate"), st.floats(0, 1))),
    min_size=1, max_size=7,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(ops=SESSION_OPS, chunk=st.sampled_from([8, 64]))
def test_a_session_with_images_equals_uncached(each_vlm, ops, chunk):
    """A video call's session: user turns with camera frames appended to the KV as they come,
    replies generated and truncated to what was heard; each reply equals an uncached run over
    exactly the session's ids and images."""
    vlm, vlm_oracle = each_vlm
    from desktop.protocol import AppendInput, CreateSession, Generate, TruncateReply

    t = vlm.template
    client = make_client(vlm, num_slots=2, cache_mode="imc+spc", prefill_chunk=chunk, prefill_budget=chunk + 8, runner="auto")
    assert isinstance(client.run(CreateSession("c", "s", "You see the user's camera."))[-1], Done)
    history = [Message("system", "You see the user's camera.")]
    ids, images, reply_at = t.encode(history).ids, [], None
    for n, op in enumerate(ops):
        if op[0] == "append":
            msg = Message("user", op[1], tuple(IMAGES[i] for i in op[2]))
            assert isinstance(client.run(AppendInput(f"a{n}", "s", (msg,)))[-1], Done)
            ids += t.encode_delta(history, [msg]).ids
            history.append(msg)
            images += list(msg.images)
            reply_at = None
        elif op[0] == "truncate":
            if reply_at is None:
                continue
            words = history[-1].content.split()
            heard = " ".join(words[: int(len(words) * op[1])])
            assert isinstance(client.run(TruncateReply(f"t{n}", "s", heard))[-1], Done)
            del ids[reply_at:]
            history.pop()
            reply_at = None
            if heard:
                ids += t.encode_delta(history, [Message("assistant", heard)]).ids
                history.append(Message("assistant", heard))
        else:
            done = client.run(Generate(f"g{n}", "s", SamplingParams(max_tokens=op[1])))[-1]
            assert isinstance(done, Done), done
            assert list(done.token_ids) == vlm_oracle.ids(ids + t.gen_prompt_ids, images, op[1])
            out = list(done.token_ids)
            if out:
                reply_at = len(ids)
                history.append(Message("assistant", done.text))
            ids += t.gen_prompt_ids + out + t.close_after_reply(out)


def test_token_prefix_salvage_is_skipped_with_images(vlm):
    """Another conversation that starts with the same text as a slot holding an image reuses no
    KV by tokens (image positions are no provable boundary); text-only ones still do."""
    client = make_client(vlm, num_slots=2, cache_mode="imc", cache_min_tokens=4, prefill_chunk=64, prefill_budget=64)
    chat(client, "a", [Message("user", "same words here", (IMAGES[0],))], MAX)
    b = chat(client, "b", [Message("user", "same words here and more", (IMAGES[0],))], MAX)  # shares 20+ ids
    assert b.stats.kind == MatchKind.MISS.value and b.stats.cached_tokens == 0
    chat(client, "c", [Message("user", "plain words here and there")], MAX)
    d = chat(client, "d", [Message("user", "plain words here and there, and more")], MAX)
    assert d.stats.kind == MatchKind.PREFIX.value and d.stats.cached_tokens > 4


def test_images_on_a_text_model_are_refused_and_the_worker_goes_on(tiny_lm):
    client = make_client(tiny_lm, num_slots=1)
    events = client.run(Chat("x", (Message("user", "see", (IMAGES[0],)),), SamplingParams(max_tokens=3)))
    assert isinstance(events[-1], ErrorEvent) and "cannot see images" in events[-1].message
    assert chat(client, "y", [Message("user", "hello")], 3).token_ids


def test_chunks_never_split_an_image():
    k = -5
    ids = [1, 2, k, k, k, k, 3, 4]
    assert safe_cut(ids, 0, 4) == 2  # stops before the image
    assert safe_cut(ids, 2, 2) == 4  # an image at the start is taken whole
    assert safe_cut(ids, 0, 6) == 6 and safe_cut(ids, 6, 8) == 2
    assert safe_cut([k, k, 7, -9, -9], 0, 4) == 3  # would end inside the second image: cut before it
    assert safe_cut([k, k, 7, -9, -9], 3, 1) == 2


def test_sampling_with_a_repetition_penalty_skips_image_positions(vlm):
    """The penalty reads the prompt's ids: image positions (negative keys) are no tokens."""
    from desktop.model.sampling import apply_repetition_penalty

    logits = torch.tensor([1.0, -1.0, 2.0])
    assert apply_repetition_penalty(logits, [IMAGES[0].key, 0, IMAGES[0].key], 2.0).tolist() == [0.5, -1.0, 2.0]
    client = make_client(vlm, num_slots=1)
    cmd = Chat("p", (Message("user", "describe", (IMAGES[0],)),), SamplingParams(max_tokens=4, repetition_penalty=1.3))
    done = client.run(cmd)[-1]
    assert not isinstance(done, ErrorEvent) and len(done.token_ids) == 4
