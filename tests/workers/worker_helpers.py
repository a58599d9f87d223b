"""Helpers for worker tests: an independent uncached greedy oracle (full prefill from scratch,
no batching), a client that checks integrity after every step, and a chat shortcut."""

from __future__ import annotations

import os
import signal

import torch

from desktop.protocol import Chat, Done
from desktop.model import kv
from desktop.model.fast_llama import FastLlama
from desktop.model.loader import LoadedModel
from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.workers.config import WorkerConfig
from desktop.workers.local import LocalClient
from desktop.workers.worker import Worker


class Oracle:
    """Greedy generation with no cache reuse: the whole prompt prefilled at once, every time."""

    def __init__(self, lm: LoadedModel) -> None:
        self.lm = lm
        self.memo: dict[tuple, list[int]] = {}

    @torch.no_grad()
    def ids(self, prompt: list[int], max_tokens: int) -> list[int]:
        key = (tuple(prompt), max_tokens)
        if key not in self.memo:
            cache = kv.new_cache(self.lm.model.config)
            logits = self.lm.model(input_ids=torch.tensor([prompt]), past_key_values=cache, use_cache=True).logits[0, -1]
            step = lambda token: self.lm.model(input_ids=torch.tensor([[token]]), past_key_values=cache,  # noqa: E731
                                               use_cache=True).logits[0, -1]
            self.memo[key] = greedy(logits, step, self.lm.template.eos_ids, max_tokens)
        return self.memo[key]

    def chat(self, msgs: list[Message], max_tokens: int) -> list[int]:
        return self.ids(self.lm.template.prompt_ids(msgs), max_tokens)


class CtrlC:
    """Sends a real SIGINT to this process right after the model's first layer, on its n-th
    forward once armed: the signal lands in the middle of a forward, as a user's Ctrl-C does.
    Both runners: a hook on the transformers model's first layer, and FastLlama's per-layer
    callback (a class attribute, restored by close)."""

    def __init__(self, lm: LoadedModel) -> None:
        self.armed_at = self.calls = 0
        self.handle = lm.model.model.layers[0].register_forward_hook(lambda *_: self._forward())
        layers, seen = lm.model.config.num_hidden_layers, [0]

        class Tap:
            def __call__(tap) -> None:
                seen[0] += 1
                if seen[0] % layers == 1 % layers:
                    self._forward()

        self._saved = FastLlama.__dict__.get("on_layer")
        FastLlama.on_layer = Tap()

    def arm(self, nth_forward: int) -> None:
        self.calls, self.armed_at = 0, nth_forward

    def _forward(self) -> None:
        if self.armed_at:
            self.calls += 1
            if self.calls == self.armed_at:
                self.armed_at = 0
                os.kill(os.getpid(), signal.SIGINT)

    def close(self) -> None:
        self.handle.remove()
        FastLlama.on_layer = self._saved


S = Message("system", "You are a helpful assistant.")


def U(text: str) -> Message:
    return Message("user", text)


def A(text: str) -> Message:
    return Message("assistant", text)


def check_integrity(worker: Worker) -> None:
    """Raise AssertionError if slots, sessions, sequences and the runner's KV disagree (called
    after every step)."""
    sched, runner = worker.scheduler, worker.runner
    assert not sched.ops, "KV ops left unapplied"
    active = sched.active()
    sched.table.check_integrity(runner.kv_len, {s.request_id for s in active})
    for seq in active:
        n = runner.kv_len(seq.slot.index)
        assert n == seq.num_kv, f"{seq.request_id}: KV {n} (-1: layers disagree) != ids {seq.num_kv}"
    for sid, session in sched.sessions.items():
        assert session.slot.session_id == sid, "session's slot is not pinned to it"


def make_client(lm: LoadedModel, **config) -> LocalClient:
    """A LocalClient whose worker's integrity is checked after every step."""
    return LocalClient(lm, WorkerConfig(**config), on_step=check_integrity)


def chat(client: LocalClient, rid: str, msgs, max_tokens: int = 8) -> Done:
    events = client.run(Chat(rid, tuple(msgs), SamplingParams(max_tokens=max_tokens)))
    done = events[-1]
    assert isinstance(done, Done), done
    return done


def run_all(client: LocalClient, cmds) -> dict[str, list]:
    """Submit all commands at once (they batch), step until each has its terminal event."""
    from desktop.protocol import TERMINAL

    for cmd in cmds:
        client.submit(cmd)
    want = {c.request_id for c in cmds}
    out: dict[str, list] = {rid: [] for rid in want}
    while want:
        for rid in list(want):
            box = client.events.get(rid)
            while box:
                event = box.popleft()
                out[rid].append(event)
                if isinstance(event, TERMINAL):
                    want.discard(rid)
        if want:
            assert client.worker.step() or any(client.events.get(r) for r in want), "worker idle with requests open"
            client.on_step(client.worker)
    return out


def request_for(op, conv: list[Message], *, long_text: str = "", pictures=None) -> list[Message]:
    """The message list a random-conversation op sends; `conv` is trimmed so that the reply can be
    appended. Ops: ("regen", …), ("edit", conv, which, text[, image indices]), ("system", conv,
    text), ("turn", conv, text[, image indices]), ("long", …) — `long_text` as the user's text;
    `pictures(indices)` gives the images an op names (the image tests)."""
    def images(i: int) -> tuple:
        return tuple(pictures(op[i])) if pictures is not None and len(op) > i else ()

    kind = op[0]
    if kind == "regen" and conv and conv[-1].role == "assistant":
        conv.pop()
        return list(conv)
    if kind == "edit":
        users = [i for i, m in enumerate(conv) if m.role == "user"]
        if users:
            del conv[users[op[2] % len(users)] :]
            conv.append(Message("user", op[3], images(4)))
            return list(conv)
    if kind == "system":
        if conv and conv[0].role == "system":
            conv[0] = Message("system", op[2])
        else:
            conv.insert(0, Message("system", op[2]))
    if not conv or conv[-1].role != "user":
        text = long_text if kind == "long" else (op[2] if len(op) > 2 and isinstance(op[2], str) else "Hi")
        conv.append(Message("user", text, images(3) if kind == "turn" else ()))
    return list(conv)


def greedy(logits, step, eos_ids, max_tokens: int) -> list[int]:
    """Greedy tokens from the first logits on; `step(token)` gives the next logits."""
    out: list[int] = []
    while True:
        token = int(logits.argmax())
        out.append(token)
        if token in eos_ids or len(out) >= max_tokens:
            return out
        logits = step(token)
