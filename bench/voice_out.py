"""Spoken reply latency: embedded default LLM → pipeline (segmenter → Piper) → fake speaker.

The speaker consumes audio in real time (20 ms blocks on the real clock), so every figure includes
the real compute of the LLM and the TTS. Times are from the request's submission. The last line is
JSON with ttft, first segment complete, its synthesis time, first audio frame at the speaker, the
pipeline's own overhead, TTS real-time factor and underruns during playback."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from desktop.speech.pipeline import Pipeline, PipelineDone, PipelineError, Segment, SegmenterConfig  # noqa: E402
from desktop.protocol import Chat, ChunkEvent, Done  # noqa: E402
from desktop.media.clock import RealClock  # noqa: E402
from desktop.media.fake_audio import FakeAudioOutput  # noqa: E402
from desktop.model.loader import ModelSpec, load_model  # noqa: E402
from desktop.model.messages import Message  # noqa: E402
from desktop.model.params import SamplingParams  # noqa: E402
from desktop.model.tts import PiperTTS  # noqa: E402
from desktop.workers.config import WorkerConfig  # noqa: E402
from desktop.workers.local import LocalClient  # noqa: E402

PROMPT = "Tell me, in a few sentences, how to make a good cup of tea."


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--tokens", type=int, default=96)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--threads", type=int, default=1, help="LLM threads (the TTS and speaker need a core too)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    lm = load_model(ModelSpec("default", args.dtype))
    tts = PiperTTS()
    clock = RealClock()
    sink = FakeAudioOutput(clock, pre_roll_ms=120, block_ms=20, record=False)
    events: list = []
    pipe = Pipeline(tts, sink, SegmenterConfig(), clock=clock, on_event=events.append)
    pipe.start()
    client = LocalClient(lm, WorkerConfig(num_slots=2))
    msgs = (Message("system", "You are a helpful assistant."), Message("user", PROMPT))
    client.run(Chat("warmup", msgs[1:], SamplingParams(max_tokens=4)))  # first-call overheads
    list(tts.synthesize("Warm up."))

    sink.start(thread=True)
    rid = "voice"
    t0 = clock.now()
    ttft = None
    for event in client.stream(Chat(rid, msgs, SamplingParams(max_tokens=args.tokens))):
        if isinstance(event, ChunkEvent):
            ttft = ttft if ttft is not None else clock.now() - t0
            pipe.feed(rid, event.text_delta)
        elif isinstance(event, Done):
            llm_done = clock.now() - t0
            pipe.end(rid)
    deadline = time.monotonic() + 120
    while not any(isinstance(e, (PipelineDone, PipelineError)) and e.request_id == rid for e in events):
        assert time.monotonic() < deadline, "pipeline did not finish"
        time.sleep(0.01)
    end = next(e for e in events if isinstance(e, (PipelineDone, PipelineError)) and e.request_id == rid)
    assert isinstance(end, PipelineDone), end
    while sink.stats()["buffered_ms"] > 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    stats, speaker = end.stats, sink.stats()
    first_segment = next(e for e in events if isinstance(e, Segment) and e.request_id == rid)
    first_audio = sink.first_audio_at(rid)
    pipe.close()
    sink.close()
    ms = lambda t: round(1000 * (t - t0), 1)  # noqa: E731
    result = {
        "ttft_ms": round(1000 * ttft, 1),
        "llm_done_ms": round(1000 * llm_done, 1),
        "first_segment_ms": ms(stats["first_segment_at"]),
        "first_segment_text": first_segment.text,
        "first_synth_ms": round(stats["first_synth_ms"], 1),
        "first_audio_ms": ms(first_audio),
        "segments": stats["segments"],
        "audio_s": round(stats["audio_s"], 2),
        "tts_rtf": round(stats["synth_ms"] / 1000 / stats["audio_s"], 3),
        "underruns": speaker["underruns"],
    }
    result["overhead_ms"] = round(result["first_audio_ms"] - result["first_segment_ms"] - result["first_synth_ms"], 1)
    result["first_audio_after_ttft_ms"] = round(result["first_audio_ms"] - result["ttft_ms"], 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
