"""Output pipeline on a virtual clock with a fake TTS and a fake sink: ordering, backpressure,
cancel, windows, errors; plus the virtual clock the media and pipeline tests rely on."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from desktop.speech.pipeline import (
    AudioChunk, Pipeline, PipelineDone, PipelineError, Segment, SegmenterConfig,
)
from desktop.media.clock import ClockMode, VirtualClock

SR, SPC = 16_000, 10  # fake sample rate; samples per character


class FakeTTS:
    """SPC samples per character, `chunk_chars` characters a chunk; each call waits `delay_s` and
    each later chunk `chunk_delay_s` on the clock; text containing `fail_on` raises."""

    sample_rate = SR

    def __init__(self, clock, *, delay_s=0.0, chunk_chars=0, chunk_delay_s=0.0, fail_on=None):
        self.clock, self.delay_s, self.chunk_chars, self.chunk_delay_s = clock, delay_s, chunk_chars, chunk_delay_s
        self.fail_on, self.calls, self.made = fail_on, [], []  # made: the source text of each chunk

    def synthesize(self, text):
        self.calls.append(text)
        self.clock.sleep(self.delay_s)
        if self.fail_on and self.fail_on in text:
            raise RuntimeError("voice model crashed")
        step = self.chunk_chars or len(text)
        for i in range(0, len(text), step):
            if i:
                self.clock.sleep(self.chunk_delay_s)
            self.made.append(text)
            yield np.full(len(text[i:i + step]) * SPC, 0.1, np.float32)


class FakeSink:
    """Records (op, request_id, samples, clock time); while closed, writes block until released
    or until their request is flushed (like a full speaker buffer)."""

    def __init__(self, clock, *, open_=True):
        self.clock, self.log, self.open, self.flushed = clock, [], open_, set()
        self.cond = threading.Condition()

    def write(self, request_id, samples, sample_rate):
        assert samples.dtype == np.float32 and sample_rate == SR
        with self.cond:
            self.cond.wait_for(lambda: self.open or request_id in self.flushed, timeout=5)
            self.log.append(("write", request_id, samples.size, self.clock.now()))

    def end(self, request_id):
        with self.cond:
            self.log.append(("end", request_id, 0, self.clock.now()))

    def pace(self, request_id, audio_s, synth_s, next_s=None):
        with self.cond:
            self.log.append(("pace", request_id, (audio_s, synth_s, next_s), self.clock.now()))

    def flush(self, request_id=None):
        with self.cond:
            self.log.append(("flush", request_id, 0, self.clock.now()))
            self.flushed.add(request_id)
            self.cond.notify_all()

    def release(self):
        with self.cond:
            self.open = True
            self.cond.notify_all()

    def ops(self, rid, op=None):
        with self.cond:
            return [e for e in self.log if e[1] == rid and op in (None, e[0])]

    def samples(self, rid):
        return sum(e[2] for e in self.ops(rid, "write"))


class Events:
    """on_event recorder with real-time waits (the stages are threads)."""

    def __init__(self):
        self.items, self.cond = [], threading.Condition()

    def __call__(self, event):
        with self.cond:
            self.items.append(event)
            self.cond.notify_all()

    def of(self, rid, kind=object):
        with self.cond:
            return [e for e in self.items if e.request_id == rid and isinstance(e, kind)]

    def wait(self, pred, timeout=5.0):
        with self.cond:
            assert self.cond.wait_for(pred, timeout), self.items

    def wait_end(self, *rids):
        self.wait(lambda: all(self.of(r, (PipelineDone, PipelineError)) for r in rids))


@pytest.fixture
def rig():
    """make(**kw) → (pipeline, tts, sink, events, clock), all on one manual virtual clock."""
    made = []

    def make(config=SegmenterConfig(), *, high_water=8, sink_open=True, **tts_kw):
        clock = VirtualClock()
        tts, sink, events = FakeTTS(clock, **tts_kw), FakeSink(clock, open_=sink_open), Events()
        p = Pipeline(tts, sink, config, clock=clock, high_water=high_water, on_event=events)
        p.start()
        made.append((p, sink, clock))
        return p, tts, sink, events, clock

    yield make
    for p, sink, clock in made:
        sink.release()
        clock.advance(1e6)
        p.close()


def drive(clock, until, timeout=5.0):
    """Move virtual time to each sleeper's deadline in turn until `until()` holds."""
    end = time.monotonic() + timeout
    while not until():
        assert time.monotonic() < end, "timed out driving the virtual clock"
        if clock.wait_for_sleepers(1, timeout=0.005):
            clock.step()


def until(pred, timeout=5.0):
    """Poll a condition that no event announces (e.g. a stage blocking)."""
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.001)


def squash(text):
    return "".join(text.split())


def test_events_arrive_in_order_per_request(rig):
    p, tts, sink, events, clock = rig(SegmenterConfig(first_window_tokens=3, max_segment_tokens=8), high_water=2)
    texts = {rid: " ".join(f"{rid}w{i}{'.' if i % 5 == 4 else ''}" for i in range(40)) for rid in ("a", "b", "c")}

    def stream(rid):
        for word in texts[rid].split(" "):
            p.feed(rid, word + " ")
        p.end(rid)

    feeders = [threading.Thread(target=stream, args=(rid,)) for rid in texts]
    for t in feeders:
        t.start()
    for t in feeders:
        t.join(5)
    events.wait_end(*texts)
    for rid, text in texts.items():
        mine = events.of(rid)
        segs, chunks = events.of(rid, Segment), events.of(rid, AudioChunk)
        assert [s.sequence for s in segs] == list(range(len(segs)))
        assert [s.is_last for s in segs] == [False] * (len(segs) - 1) + [True]
        assert [c.sequence for c in chunks] == list(range(len(chunks)))
        assert [c.is_last for c in chunks] == [False] * (len(chunks) - 1) + [True]
        assert isinstance(mine[-1], PipelineDone) and len(events.of(rid, PipelineDone)) == 1
        assert squash("".join(s.text for s in segs)) == squash(text)
        # the sink got each segment's audio, in segment order, then end()
        assert [e[2] for e in sink.ops(rid, "write")] == [len(s.text) * SPC for s in segs if s.text]
        assert sink.ops(rid)[-1][0] == "end"
        assert mine[-1].stats["segments"] == len([s for s in segs if s.text])


def test_slow_consumer_blocks_the_upstream_and_nothing_is_lost(rig):
    p, tts, sink, events, clock = rig(high_water=2, sink_open=False)
    text = " ".join(f"Sentence number {i} is here." for i in range(30))
    fed = []

    def stream():
        for word in text.split(" "):
            p.feed("r", word + " ")
            fed.append(word)
        p.end("r")

    feeder = threading.Thread(target=stream)
    feeder.start()
    until(lambda: p.feed_waits > 0)  # the sink holds the TTS, which holds the segmenter...
    m = p.metrics()
    assert feeder.is_alive() and len(fed) < len(text.split(" "))
    assert m["text_depth"] <= 2 and m["speech_depth"] <= 2
    sink.release()
    feeder.join(5)
    events.wait_end("r")
    segs = events.of("r", Segment)
    assert squash("".join(s.text for s in segs)) == squash(text)
    assert sink.samples("r") == SPC * sum(len(s.text) for s in segs)
    done, = events.of("r", PipelineDone)
    assert done.stats["feed_waits"] > 0 and not events.of("r", PipelineError)
    assert done.stats["audio_s"] == pytest.approx(sink.samples("r") / SR)


def test_cancel_mid_reply_flushes_audio_within_50ms_of_virtual_time(rig):
    p, tts, sink, events, clock = rig(chunk_chars=5, chunk_delay_s=0.02)
    p.feed("r1", "This sentence is long enough to need many chunks of audio. " * 4)
    drive(clock, lambda: len(sink.ops("r1", "write")) >= 3)
    t0, made = clock.now(), len(tts.made)
    p.cancel("r1")
    p.feed("r2", "Hello there.")
    p.end("r2")
    drive(clock, lambda: events.of("r2", PipelineDone))
    flush = sink.ops("r1", "flush")[0]
    assert flush[3] - t0 <= 0.05
    assert sink.ops("r1")[-1][0] == "flush"  # nothing of r1 stays queued in the sink
    assert len([t for t in tts.made[made:] if "Hello" not in t]) <= 1  # r1's TTS stopped within a chunk
    assert sink.ops("r2", "write")[0][3] - t0 <= 0.05  # ...and was free for the next request
    done, = events.of("r1", PipelineDone)
    assert done.stats["cancelled"]
    seen = len(events.of("r1"))
    p.feed("r1", "late text. ")  # late text for a cancelled request is ignored
    p.end("r1")
    p.end("probe")
    events.wait_end("probe")
    assert len(events.of("r1")) == seen
    p.cancel("r2")  # done in the pipeline but maybe still playing: its audio is flushed too
    assert sink.ops("r2")[-1][0] == "flush" and len(events.of("r2", PipelineDone)) == 1


def test_cancel_never_deadlocks_with_a_blocked_upstream(rig):
    p, tts, sink, events, clock = rig(high_water=1, sink_open=False)
    feeder = threading.Thread(target=lambda: [p.feed("r1", f"Word {i}. ") for i in range(50)])
    feeder.start()
    until(lambda: p.feed_waits > 0)
    p.cancel("r1")
    feeder.join(2)
    assert not feeder.is_alive()
    assert sink.ops("r1")[-1][0] == "flush"
    sink.release()
    p.feed("r2", "Still fine.")
    p.end("r2")
    events.wait_end("r2")
    assert sink.samples("r2") == len("Still fine.") * SPC


def test_whole_reply_window_waits_for_is_last(rig):
    p, tts, sink, events, clock = rig(SegmenterConfig(window_size=-1))
    text = "First sentence. Second one, with a clause. " + "More words " * 50
    p.feed("r1", text)
    clock.advance(10.0)  # far past min_flush_interval_ms
    p.end("probe")  # the text queue is FIFO: once the probe is done, r1's text has been seen
    events.wait_end("probe")
    assert events.of("r1", Segment) == [] and tts.calls == []
    p.end("r1")
    events.wait_end("r1")
    seg, = events.of("r1", Segment)
    assert seg.is_last and seg.text == " ".join(text.split())
    assert tts.calls == [seg.text]


def test_first_segment_is_flushed_by_the_small_first_window(rig):
    p, tts, sink, events, clock = rig(delay_s=0.05)
    for word in "Well I think that the answer you want is probably".split():
        p.feed("r1", word + " ")
    drive(clock, lambda: sink.ops("r1", "write"))
    first = events.of("r1", Segment)[0]
    assert first.text == "Well I think that the answer" and not first.is_last
    p.end("r1")
    drive(clock, lambda: events.of("r1", PipelineDone))
    stats = events.of("r1", PipelineDone)[0].stats
    assert stats["first_segment_at"] == first.t_complete == 0.0
    assert stats["first_synth_ms"] == pytest.approx(50.0)
    assert stats["first_audio_at"] == pytest.approx(0.05)


def test_reply_with_no_sentence_end_is_still_spoken(rig):
    p, tts, sink, events, clock = rig()
    p.feed("r1", "ok so yes")
    p.end("r1")
    events.wait_end("r1")
    assert [(s.text, s.is_last) for s in events.of("r1", Segment)] == [("ok so yes", True)]
    assert sink.samples("r1") == 9 * SPC
    p.feed("r2", "one two three ")  # no boundary, under the first window: the timer speaks it
    clock.advance(0.6)
    events.wait(lambda: events.of("r2", Segment))
    assert events.of("r2", Segment)[0].text == "one two three"


def test_tts_error_ends_the_request_with_a_clear_error_and_the_text_stays(rig):
    p, tts, sink, events, clock = rig(fail_on="boom")
    p.feed("r1", "Hello there my friend. Then boom happened. And more text. ")
    p.feed("r2", "Other requests go on.")
    p.end("r2")
    events.wait_end("r1", "r2")
    p.feed("r1", "The LLM keeps streaming. ")  # no exception, nothing more happens
    p.end("r1")
    err, = events.of("r1", PipelineError)
    assert err.code == "tts_failed" and "Speech synthesis failed" in err.message and "text reply" in err.message
    assert not events.of("r1", PipelineDone)
    assert events.of("r1", Segment)[0].text == "Hello there my friend."
    assert sink.samples("r1") == len("Hello there my friend.") * SPC and sink.ops("r1", "end")
    assert events.of("r2", PipelineDone) and sink.samples("r2") == len("Other requests go on.") * SPC


@settings(max_examples=10, deadline=None)
@given(cuts=st.lists(st.integers(0, 200), max_size=20))
def test_random_chunking_through_the_pipeline_gives_the_same_segments(cuts):
    text = "Yes, of course. Here is a plan: first we look, then we leap. Done! " * 2
    results = []
    for chunked in (False, True):
        clock, events = VirtualClock(), Events()
        bounds = sorted({0, len(text), *(c % len(text) for c in cuts)}) if chunked else [0, len(text)]
        with Pipeline(FakeTTS(clock), FakeSink(clock), clock=clock, high_water=2, on_event=events) as p:
            for a, b in zip(bounds, bounds[1:]):
                p.feed("r", text[a:b])
            p.end("r")
            events.wait_end("r")
        results.append([(s.sequence, s.text) for s in events.of("r", Segment)])
    assert results[0] == results[1]


def test_virtual_clock_sleepers_wake_when_time_passes_their_deadline():
    clock, woke = VirtualClock(), []
    sleeper = threading.Thread(target=lambda: (clock.sleep(0.02), woke.append(clock.now())))
    sleeper.start()
    assert clock.wait_for_sleepers(1) and clock.next_deadline() == pytest.approx(0.02)
    for _ in range(3):
        clock.advance(0.005)
    assert sleeper.is_alive() and clock.sleepers == 1
    clock.advance(0.005)
    sleeper.join(1)
    assert woke == [pytest.approx(0.02)] and clock.sleepers == 0 and not clock.step()


def test_virtual_clock_compute_mode_skips_sleeps_and_counts_compute():
    clock = VirtualClock(mode="compute")
    assert clock.mode is ClockMode.COMPUTE
    t0 = time.perf_counter()
    clock.sleep(30.0)
    assert time.perf_counter() - t0 < 0.5 and clock.now() >= 30.0
    before = clock.now()
    sum(range(200_000))
    assert clock.now() > before


def test_the_sink_is_paced_before_each_write_with_the_synthesis_time_and_what_comes_next(rig):
    p, tts, sink, events, clock = rig(delay_s=0.05)
    p.feed("r1", "Paris is lovely, and it is very old. It has many museums to see. ")
    p.end("r1")
    events.wait(lambda: any(s.is_last for s in events.of("r1", Segment)))  # all of it is cut
    drive(clock, lambda: events.of("r1", PipelineDone))
    ops = [e for e in sink.ops("r1") if e[0] in ("pace", "write")]
    assert [op for op, *_ in ops] == ["pace", "write"] * (len(ops) // 2)
    texts = [s.text for s in events.of("r1", Segment) if s.text]
    assert texts[0] == "Paris is lovely,"
    paces = [e[2] for e in ops if e[0] == "pace"]
    assert [audio for audio, _, _ in paces] == [len(t) * SPC / SR for t in texts]
    assert all(took == pytest.approx(0.05) for _, took, _ in paces)
    assert paces[0][2] > 0 and paces[-1][2] == 0.0  # the next sentence's length, then nothing more
    q = "r2"
    p.feed(q, "It is still being written, and ")
    drive(clock, lambda: [e for e in sink.ops(q) if e[0] == "pace"])
    assert sink.ops(q, "pace")[0][2][2] is None  # the text to come is not known yet
    p.end(q)
    drive(clock, lambda: events.of(q, PipelineDone))
