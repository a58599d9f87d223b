"""Issue 19, polish item 9 (exit noise): a closed microphone or far-end reference lets go of its
soxr resampler, so a device still referenced when the interpreter exits (a lingering thread, a
cycle) no longer makes nanobind print "leaked" lines, and a collection at exit frees resamplers
left in reference cycles; a microphone's resampler comes back with its next block."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from desktop.media.capture import Capture
from desktop.media.clock import VirtualClock
from desktop.media.fake_mic import FakeMicrophone
from desktop.media.far_end import FarEndReference

pytestmark = pytest.mark.hardening

SCRIPT = textwrap.dedent("""
    import threading, time
    import numpy as np
    from desktop.media.clock import VirtualClock
    from desktop.media.fake_mic import FakeMicrophone
    from desktop.media.far_end import FarEndReference

    clock = VirtualClock()
    mic = FakeMicrophone(clock, device_rate=48000)
    mic.play(np.ones(4800, np.float32) * 0.1, 48000)
    mic.start()
    clock.advance(0.2)
    mic.pump()
    far = FarEndReference(22050, block_frames=441)
    far.on_played(np.ones(441, np.float32), 0.0)
    far.read(0.0, 320)
    mic.close()
    far.release()
    keep = [mic, far]  # as a call still referenced by a daemon thread at exit
    threading.Thread(target=lambda: (keep, time.sleep(60)), daemon=True).start()
""")


def test_devices_closed_before_exit_leave_no_nanobind_leak_lines():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "leaked" not in done.stderr, done.stderr


def test_a_closed_microphone_releases_its_resampler():
    clock = VirtualClock()
    mic = FakeMicrophone(clock, device_rate=48000)
    mic.play(np.full(48000, 0.1, np.float32), 48000)
    mic.start()
    clock.advance(0.2)
    mic.pump()
    assert mic._rs is not None and len(mic.read()) > 0
    mic.close()
    assert mic._rs is None


def test_capture_after_a_release_resamples_again():
    capture = Capture(48000)
    block = np.full(960, 0.1, np.float32)
    for i in range(10):
        capture._capture(block, i * 0.02)
    capture.release()
    for i in range(10, 20):
        capture._capture(block, i * 0.02)
    frames = capture.read()
    assert capture._rs is not None and len(frames) >= 15
    assert np.all(np.diff(frames.times) > 0)


def test_a_released_far_end_reference_starts_a_new_segment():
    far = FarEndReference(22050, block_frames=441)
    far.on_played(np.ones(441, np.float32), 0.0)
    far.read(0.0, 320)
    assert far._rs is not None
    far.release()
    assert far._rs is None
    far.on_played(np.ones(441, np.float32), 0.02)
    assert far.read(0.02, 320)[0].size == 320



def test_a_test_run_with_a_recorded_call_ends_without_leak_lines():
    """A recorded call leaves resamplers in reference cycles; the collection at exit frees them."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run([sys.executable, "-m", "pytest", "tests/recording/test_call_recording.py", "-q",
                           "-p", "no:cacheprovider"], cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert " passed" in done.stdout, done.stdout[-2000:]
    assert "leaked" not in done.stdout + done.stderr, (done.stdout + done.stderr)[-2000:]
