"""A call prefills the user's words while they speak (issue 21): each partial transcript goes into
the call's session as a draft; the reply, sent with the final words in one command, keeps the
drafts' KV where it agrees (reported as draft_tokens) and is the reply a session given only the
final words makes (greedy, the tiny model, the real gateway and Voice on a virtual clock)."""

from __future__ import annotations

from call_fakes import EnergyDetector, ScriptedMic, ScriptedTranscriber, call_rig, pump_frames, spoken_ids, until_heard, until_phase
from gw_helpers import run

from desktop.call.call import Call, CallEvent
from desktop.call.state import CallPhase
from desktop.media.clock import VirtualClock
from desktop.model.params import SamplingParams
from desktop.protocol import ChunkEvent

SYSTEM = "Answer briefly."
FINAL = "What is the capital of France?"


class WordByWord(ScriptedTranscriber):
    """Hears the final text a word more every few voiced frames (its last partial mis-heard the
    last word, as a real recogniser's may), then gives the final text."""

    def begin(self, pre_roll, on_partial) -> None:
        self.began += 1
        self.on_partial, self.voiced = on_partial, 0

    def feed(self, samples, voiced) -> None:
        self.fed += samples.size
        self.voiced += voiced
        words = FINAL.split()
        n = self.voiced // 4
        if voiced and self.voiced % 4 == 0 and 0 < n <= len(words):
            self.on_partial(" ".join(words[: n - 1] + ["Frans" if n == len(words) else words[n - 1]]))


def test_partials_are_prefilled_and_the_reply_is_that_of_the_final_words():
    async def main() -> None:
        clock = VirtualClock()
        speaker, voice, gw = await call_rig(clock)
        params = SamplingParams(max_tokens=12)
        mic = ScriptedMic(clock)
        call = Call(gw, mic, voice, EnergyDetector(), WordByWord([FINAL]), clock=clock, system=SYSTEM, params=params)
        events: list[CallEvent] = []
        call.listeners.append(events.append)
        await call.start()

        async def frames(n: int, loud: bool) -> None:
            await pump_frames(clock, mic, speaker, call, n, loud)

        await frames(30, True)  # six words heard, one partial each
        assert [e.text for e in events if e.kind == "partial"][-1] == "What is the capital of Frans"
        await until_phase(call, CallPhase.SPEAKING, frames, events=events)
        for _ in range(400):  # the reply's Done (its stats) may come after its first audio
            if call.turns[0].ttft_ms is not None:
                break
            await frames(1, False)
        turn = call.turns[0]
        assert turn.draft_tokens > len("What is the capital of")  # the words agreed that far were in the KV
        alone = await gw.create_session(SYSTEM)
        events = [e async for e in gw.generate_stream(alone, params, [{"role": "user", "content": FINAL}])]
        assert turn.assistant_text == "".join(e.text_delta for e in events if isinstance(e, ChunkEvent))
        assert turn.new_tokens + turn.draft_tokens == events[-1].stats.new_tokens  # the rest: the final word on
        await call.end()
        await gw.close()
        voice.close()
        speaker.close()

    run(main(), timeout=120)


class Partials(ScriptedTranscriber):
    """Each utterance: a partial of its words at once (its onset, in the pre-roll) and every few
    voiced frames, then the final text."""

    def begin(self, pre_roll, on_partial) -> None:
        self.began += 1
        self.on_partial, self.voiced = on_partial, 0
        on_partial(self.texts[0].split()[0])  # a barge-in's: while the reply is being cut

    def feed(self, samples, voiced) -> None:
        self.fed += samples.size
        self.voiced += voiced
        words = self.texts[0].split()
        if voiced and self.voiced % 2 == 0:
            self.on_partial(" ".join(words[: self.voiced // 2]))


def test_a_barge_ins_drafts_go_in_after_the_trim_and_the_context_is_what_was_said_and_heard():
    async def main() -> None:
        clock = VirtualClock()
        speaker, voice, gw = await call_rig(clock)
        spoken = spoken_ids(voice)
        params = SamplingParams(max_tokens=30, ignore_eos=True)
        mic = ScriptedMic(clock)
        said = ["Tell me a story.", "No, a short one please."]
        call = Call(gw, mic, voice, EnergyDetector(), Partials(said), clock=clock, system=SYSTEM, params=params)
        events: list[CallEvent] = []
        call.listeners.append(events.append)
        await call.start()

        async def frames(n: int, loud: bool) -> None:
            await pump_frames(clock, mic, speaker, call, n, loud)

        await frames(25, True)
        await until_phase(call, CallPhase.SPEAKING, frames, events=events)
        await until_heard(voice, spoken, frames)
        first = call.turns[0]
        for _ in range(400):  # the user talks over the reply: partials come while it is cut
            if first.heard is not None:
                break
            await frames(1, True)
        await frames(10, True)
        await frames(10, False)
        await until_phase(call, CallPhase.SPEAKING, frames, events=events)
        second = call.turns[1]
        for _ in range(400):
            if second.ttft_ms is not None:
                break
            await frames(1, False)
        assert not [e for e in events if e.kind == "error"]
        history = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": said[0]}]
        history += [{"role": "assistant", "content": first.heard}] if first.heard else []
        history += [{"role": "user", "content": said[1]}]
        alone = [e async for e in gw.chat(history, params)]  # no session, no drafts: the same context
        assert second.assistant_text == "".join(e.text_delta for e in alone if isinstance(e, ChunkEvent))
        assert second.draft_tokens > 0
        await call.end()
        await gw.close()
        voice.close()
        speaker.close()

    run(main(), timeout=120)
