"""Downloads from a fake Hub on 127.0.0.1 (tests/support/fake_hub.py; never the network): only
when allowed, with progress and speed, the checksum checked, resumed after a failure and after a
restart, cancelled, and refused when the disk is too small."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from desktop.errors import OmnideskError
from desktop.models.download import Downloads, State
from desktop.models.hub import Request, choices
from tests.support.fake_hub import FakeHub

REPO = "org/tiny-GGUF"
BIG = os.urandom(1_500_000)


@pytest.fixture
def hub(monkeypatch, tmp_path: Path):
    hub = FakeHub({REPO: {"tiny-Q4_K_M.gguf": BIG, "tiny-Q8_0.gguf": BIG * 2, "README.md": b"# tiny"}}).start()
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    yield hub
    hub.stop()


def _downloads(tmp_path: Path, allowed: bool = True) -> Downloads:
    return Downloads(tmp_path / "state", lambda: tmp_path / "models", lambda: allowed)


def _wait(job, states, timeout: float = 60.0):
    end = time.monotonic() + timeout
    while job.state not in states:
        assert time.monotonic() < end, f"job still {job.state}: {job.message}"
        time.sleep(0.05)
    return job


def _q4(d: Downloads):
    files = d.list_files(Request(REPO))
    return [c for c in choices(files) if "Q4_K_M" in c.label][0].files


def test_nothing_goes_online_unless_downloads_are_allowed(hub, tmp_path):
    d = _downloads(tmp_path, allowed=False)
    with pytest.raises(OmnideskError, match="network"):
        d.list_files(Request(REPO))
    assert hub.requests == []


def test_a_download_reports_progress_and_lands_checked_in_the_models_folder(hub, tmp_path):
    hub.delay_s = 0.01
    d = _downloads(tmp_path)
    seen = []
    d.listeners.append(lambda job: seen.append((job.state, job.done, job.speed)))
    job = _wait(d.start(Request(REPO), list(_q4(d))), {State.DONE, State.PAUSED})
    assert job.state == State.DONE, job.message
    path = tmp_path / "models" / "org--tiny-GGUF" / "tiny-Q4_K_M.gguf"
    assert hashlib.sha256(path.read_bytes()).digest() == hashlib.sha256(BIG).digest()
    progress = [done for state, done, _ in seen if state == State.RUNNING]
    assert progress == sorted(progress) and any(0 < p < len(BIG) for p in progress)  # it grew, in steps
    assert any(speed > 0 for *_, speed in seen)


def test_a_file_that_fails_its_checksum_is_deleted_and_the_job_says_so(hub, tmp_path):
    hub.lie_sha.add("tiny-Q4_K_M.gguf")
    d = _downloads(tmp_path)
    job = _wait(d.start(Request(REPO), list(_q4(d))), {State.DONE, State.PAUSED})
    assert job.state == State.PAUSED and "checksum" in job.message
    assert not (tmp_path / "models" / "org--tiny-GGUF" / "tiny-Q4_K_M.gguf").exists()


def test_a_download_stopped_by_a_restart_resumes_where_it_was(hub, tmp_path):
    hub.delay_s = 0.05  # ≈ 16 KB per 50 ms: several seconds for the file
    d = _downloads(tmp_path)
    job = d.start(Request(REPO), list(_q4(d)))
    end = time.monotonic() + 60
    while job.done < 300_000:
        assert time.monotonic() < end
        time.sleep(0.05)
    d.close()  # the app quits mid-download
    assert job.state == State.PAUSED and "Resume" in job.message
    hub.delay_s = 0.0
    again = _downloads(tmp_path)  # the next start
    (restored,) = again.jobs.values()
    assert restored.state == State.PAUSED and restored.id == job.id
    assert again.left(restored) < len(BIG)  # the partial file is there
    _wait(again.resume(restored.id), {State.DONE, State.PAUSED})
    assert restored.state == State.DONE, restored.message
    ranges = [r for r in hub.requests if r.startswith("GET") and "bytes=" in r]
    assert ranges and int(ranges[-1].split("bytes=")[1].split("-")[0]) > 0
    path = tmp_path / "models" / "org--tiny-GGUF" / "tiny-Q4_K_M.gguf"
    assert path.read_bytes() == BIG
    assert _downloads(tmp_path).jobs == {}  # done: no longer listed at the next start


def test_a_cancelled_download_leaves_no_partial_file(hub, tmp_path):
    hub.delay_s = 0.05
    d = _downloads(tmp_path)
    job = d.start(Request(REPO), list(_q4(d)))
    while job.done == 0:
        time.sleep(0.05)
    d.cancel(job.id)
    assert job.state == State.CANCELLED and d.jobs == {}
    assert not list((tmp_path / "models").rglob("*.part"))
    assert _downloads(tmp_path).jobs == {}


def test_a_download_larger_than_the_free_disk_is_refused_first(hub, tmp_path, monkeypatch):
    import desktop.model.hardware as hardware

    d = _downloads(tmp_path)
    files = list(_q4(d))
    monkeypatch.setattr(hardware, "disk_free", lambda folder: 1000)
    with pytest.raises(OmnideskError, match="Not enough disk space"):
        d.start(Request(REPO), files)
    assert not any(r.startswith("GET /org") for r in hub.requests)


def test_an_unknown_repo_is_a_sentence(hub, tmp_path):
    with pytest.raises(OmnideskError, match="no model org/nothing on the Hub"):
        _downloads(tmp_path).list_files(Request("org/nothing"))


def test_the_apps_own_process_stays_offline(hub, tmp_path):
    import huggingface_hub.constants as constants

    d = _downloads(tmp_path)
    _wait(d.start(Request(REPO), list(_q4(d))), {State.DONE, State.PAUSED})
    assert os.environ["HF_HUB_OFFLINE"] == "1" and constants.is_offline_mode()  # only the child went online
