"""Issue 8, item 3, the parts of liveness that need no process: a Watchdog declares a silent (or
busy but stuck) worker hung once, keeps a slow but progressing one alive (a long prefill on a slow
CPU), and a worker's Pulse beats from inside a forward (per model layer)."""

from __future__ import annotations

import pytest
import torch

from desktop.protocol import Heartbeat
from desktop.model import kv
from desktop.workers.heartbeat import Liveness, Pulse, Watchdog
from desktop.workers.runner.hf import HFRunner

pytestmark = pytest.mark.hardening


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def watchdog(**liveness) -> tuple[Watchdog, Clock, list[float]]:
    clock, fired = Clock(), []
    dog = Watchdog(Liveness(**liveness), fired.append, "test", clock=clock)
    dog.arm()
    return dog, clock, fired


def test_silence_is_declared_hung_once_and_idle_beats_keep_it_alive():
    dog, clock, fired = watchdog(beat_s=0.5, hang_after_s=5.0)
    try:
        for _ in range(20):  # idle for 10 s, beating
            clock.now += 0.5
            dog.beat(Heartbeat(work=0, running=0))
            dog.check()
        assert not fired
        clock.now += 5.1
        dog.check()
        dog.check()
        assert fired == [pytest.approx(5.1)]
    finally:
        dog.close()


def test_a_busy_worker_whose_work_stands_still_is_hung():
    dog, clock, fired = watchdog(beat_s=0.5, hang_after_s=5.0)
    try:
        dog.beat(Heartbeat(work=7, running=1))
        for _ in range(12):  # it beats, but nothing moves
            clock.now += 0.5
            dog.beat(Heartbeat(work=7, running=1))
            dog.check()
        assert len(fired) == 1
    finally:
        dog.close()


def test_a_slow_but_progressing_worker_gets_a_longer_deadline():
    dog, clock, fired = watchdog(beat_s=0.5, hang_after_s=5.0, slack=3.0, hang_max_s=60.0)
    try:
        dog.beat(Heartbeat(work=1, running=1))
        for work in range(2, 6):  # one model layer every 4 s: a big model's prefill on a slow CPU
            clock.now += 4.0
            dog.check()
            dog.beat(Heartbeat(work=work, running=1))
        assert not fired and dog.deadline_s == pytest.approx(12.0)
        clock.now += 11.0
        dog.check()
        assert not fired
        clock.now += 1.5
        dog.check()
        assert len(fired) == 1
    finally:
        dog.close()


def test_the_pulse_beats_from_inside_a_forward(tiny_lm):
    clock, beats = Clock(), []
    pulse = Pulse(beats.append, beat_s=1.0, clock=clock)

    def tick_clock(*_):
        clock.now += 1.0  # every layer takes "a second"

    layers = tiny_lm.model.config.num_hidden_layers
    runner = HFRunner(tiny_lm.model, 1, tiny_lm.kv_bytes_per_token)
    runner.watch_layers(pulse.layer)
    extra = [layer.register_forward_pre_hook(tick_clock) for layer in tiny_lm.model.model.layers]
    try:
        with torch.no_grad():
            tiny_lm.model(input_ids=kv.as_batch(list(range(5, 69)), "cpu"), past_key_values=kv.new_cache(tiny_lm.model.config))
    finally:
        runner.watch_layers(None)
        for hook in extra:
            hook.remove()
    assert len(beats) == layers and [b.work for b in beats] == list(range(1, layers + 1))
    with torch.no_grad():  # detached: no more beats
        tiny_lm.model(input_ids=kv.as_batch([5, 6], "cpu"), past_key_values=kv.new_cache(tiny_lm.model.config))
    assert len(beats) == layers
