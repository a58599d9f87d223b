"""Issue 19, polish item 9 (the call metrics' "Gaps"): the drift of a reply is the silence the
speaker played while it ran dry, counted by the speaker — never below zero (wall-clock readings
around the device's read-ahead gave unexplained negative values)."""

from __future__ import annotations

import numpy as np
import pytest
from call_fakes import EnergyDetector, ScriptedMic, ScriptedTranscriber, call_rig, pump_frames
from gw_helpers import run

from desktop.call.call import Call, CallEvent, TurnMetrics
from desktop.call.state import CallPhase
from desktop.media.clock import VirtualClock
from desktop.media.fake_audio import FakeAudioOutput
from desktop.model.params import SamplingParams
from desktop.ui.call.metrics import COLUMNS

pytestmark = pytest.mark.hardening
RATE = 16000
GAPS = next(i for i, c in enumerate(COLUMNS) if c[0] == "Gaps")


def test_the_speaker_counts_the_silence_of_running_dry():
    clock = VirtualClock()
    out = FakeAudioOutput(clock, device_rate=RATE, pre_roll_ms=40, record=False)
    out.start()
    out.write("r", np.full(int(0.1 * RATE), 0.2, np.float32), RATE)
    clock.advance(0.3)  # 0.1 s played, then 0.2 s dry
    out.pump()
    assert out.stats()["underruns"] == 1 and out.stats()["starved_s"] == pytest.approx(0.2, abs=0.021)
    out.write("r", np.full(int(0.1 * RATE), 0.2, np.float32), RATE)
    out.end("r")
    clock.advance(0.5)  # the rest plays; the silence after the end is no gap
    out.pump()
    s = out.stats()
    assert s["underruns"] == 1 and s["starved_s"] == pytest.approx(0.2, abs=0.021)
    out.write("q", np.full(int(0.1 * RATE), 0.2, np.float32), RATE)  # the next reply's pre-roll: no gap either
    out.end("q")
    clock.advance(0.5)
    out.pump()
    assert out.stats()["starved_s"] == pytest.approx(0.2, abs=0.021)


def test_a_flush_while_dry_ends_the_gap():
    clock = VirtualClock()
    out = FakeAudioOutput(clock, device_rate=RATE, pre_roll_ms=40, record=False)
    out.start()
    out.write("r", np.full(int(0.1 * RATE), 0.2, np.float32), RATE)
    clock.advance(0.2)
    out.pump()
    out.flush("r")  # cut while it had run dry
    clock.advance(1.0)
    out.pump()
    assert out.stats()["starved_s"] == pytest.approx(0.1, abs=0.021)


def test_a_reply_played_out_has_no_negative_drift():
    async def main() -> None:
        clock = VirtualClock()
        speaker, voice, gw = await call_rig(clock)
        mic = ScriptedMic(clock)
        call = Call(gw, mic, voice, EnergyDetector(), ScriptedTranscriber(["Hello there."]), clock=clock,
                    params=SamplingParams(max_tokens=12, ignore_eos=True))
        events: list[CallEvent] = []
        call.listeners.append(events.append)
        await call.start()
        await pump_frames(clock, mic, speaker, call, 25, True)
        for _ in range(3000):
            if call.turns and call.turns[0].underruns is not None:
                break
            await pump_frames(clock, mic, speaker, call, 1, False)
        turn = call.turns[0]
        assert turn.underruns is not None, [e.kind for e in events][-20:]
        assert turn.drift_ms is not None and turn.drift_ms >= 0
        if turn.underruns == 0:
            assert turn.drift_ms == 0
        await call.end()
        voice.close()
        await gw.close()

    run(main(), 120)


def test_the_gaps_cell_says_how_many_and_how_long():
    cell = COLUMNS[GAPS][2]
    assert cell(TurnMetrics(1)) == "—"
    assert cell(TurnMetrics(1, underruns=0, drift_ms=0.0)) == "0"
    assert cell(TurnMetrics(1, underruns=2, drift_ms=180.4)) == "2 · 180 ms"
    assert "silence" in COLUMNS[GAPS][1]
