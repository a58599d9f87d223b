"""Smoke test of bench/long_chat.py on the tiny model (a 2,048-token window): a chat and a call
past the window run end to end, and the bench's accounting of what a turn must read is exact
where nothing is read twice (a call's session appends its replies' own ids)."""

import importlib.util
import sys
from pathlib import Path

import pytest

from desktop.protocol import PrefillDone

BENCH = Path(__file__).resolve().parents[1] / "bench" / "long_chat.py"
SLIDES = "slid" in PrefillDone.__dataclass_fields__  # the sliding window is in this build


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_long_chat", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_long_chat_bench_runs_past_the_tiny_window(capsys):
    out = load_bench().main(["--model", "tiny", "--turns", "20", "--call-minutes", "5", "--threads", "1"])
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("{")
    assert out["window"] == 2048 and out["temperature"] > 0  # the app's sampling
    chat, call = out["chat"], out["call"]
    assert chat["turns"] == 20 and call["turns"] == 20
    assert call["reread_reply_tokens"] == 0  # the session holds the replies' ids: must-read == prefilled
    for part in (chat, call):
        assert part["answered"] >= 8 and part["ttft_early_ms_p50"] > 0  # ≈ 200 tokens a turn: full at ≈ 10
        if part["unanswered"]:  # a build that cannot slide (this part): said, not a crash
            assert "note" in part and part["errors"]
        if part["slides"]:  # slide turns apart, the late turns timed against the early ones
            assert part["slide_ttft_ms_p50"] > 0 and part["late_over_early_ttft"] > 0
            assert part["first_slide_turn"] == part["slide_turns"][0] > 1
    if SLIDES:  # the chat's window slides (workers/slide.py): every turn answered
        assert chat["unanswered"] == 0 and chat["slides"] >= 1
