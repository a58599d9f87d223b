"""Downloads from the Hugging Face Hub, each in a child process (download_child.py) so that only
it goes online, and only when the user allowed network for downloads. A job's files land in the
models folder; its state is kept in a small JSON file, so after a failure or a restart the job is
there to resume from its partial files (in the job's folder, under PARTIAL_DIR). Disk space is checked first;
a cancel stops the child and deletes the partial files. Listeners hear every change, from the
job's reader thread."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Callable

from desktop.errors import OmnideskError
from desktop.models.download_child import partial_path
from desktop.models.facts import human_bytes
from desktop.models.hub import HubFile, Request, folder_name
from desktop.models.rate import Rate
from desktop.safefile import load_json, write_atomic

log = logging.getLogger(__name__)
FILE = "downloads.json"
MAX_BYTES = 1 << 20
LIST_TIMEOUT_S = 60.0
NETWORK_OFF = ("Downloads need the network, which Omnidesk does not use unless you allow it: tick "
               "“Allow downloads from the Hugging Face Hub” first.")


class State(str, Enum):
    RUNNING = "running"
    PAUSED = "paused"  # stopped by a failure or a restart: Resume goes on where it was
    DONE = "done"
    CANCELLED = "cancelled"


@dataclass
class Job:
    id: str
    repo_id: str
    revision: str
    files: list[HubFile]
    dest: str
    state: State = State.PAUSED
    done: int = 0  # bytes of the files finished plus the current one's
    message: str = ""  # why it stopped, or what it does now ("Checking the checksum…")
    speed: float = 0.0
    eta_s: float | None = None
    finished: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def title(self) -> str:
        names = [f.path for f in self.files if f.path.endswith(".gguf") and not f.path.startswith("mmproj")]
        return f"{self.repo_id} · {names[0]}" if len(names) == 1 else self.repo_id


class Downloads:
    """`allowed()` reads the setting; `folder()` the models folder; `state_dir` keeps FILE."""

    def __init__(self, state_dir: Path, folder: Callable[[], Path], allowed: Callable[[], bool], *,
                 python: str = sys.executable, clock: Callable[[], float] = time.monotonic) -> None:
        self._path, self._folder, self._allowed = state_dir / FILE, folder, allowed
        self._python, self._clock = python, clock
        self._lock = threading.Lock()
        self._procs: dict[str, subprocess.Popen] = {}
        self.listeners: list[Callable[[Job], None]] = []
        self.jobs: dict[str, Job] = self._load()

    # ------------------------------------------------------------------ asking the Hub

    def list_files(self, request: Request) -> list[HubFile]:
        """The repo's files (blocking: run it off the UI thread). OmnideskError with a sentence."""
        self._check_allowed()
        proc = subprocess.run(self._command("list", request.repo_id, request.revision), env=self._env(),
                              capture_output=True, text=True, timeout=LIST_TIMEOUT_S, check=False)
        event = _last_event(proc.stdout)
        if "files" not in event:
            raise OmnideskError(event.get("error") or f"The file list of {request.repo_id} could not be read.")
        return [HubFile(f["path"], int(f["size"]), f.get("sha256", ""), f.get("blob_id", "")) for f in event["files"]]

    # ------------------------------------------------------------------ jobs

    def start(self, request: Request, files: list[HubFile]) -> Job:
        """A new job for `files`, started at once (OmnideskError: network off, no room on disk)."""
        dest = self._folder() / folder_name(request.repo_id)
        job = Job(uuid.uuid4().hex[:12], request.repo_id, request.revision, list(files), str(dest))
        self._check_allowed()
        self._check_space(job)
        with self._lock:
            self.jobs[job.id] = job
        self._run(job)
        return job

    def resume(self, job_id: str) -> Job:
        job = self.jobs[job_id]
        if job.state in (State.RUNNING, State.DONE):
            return job
        self._check_allowed()
        self._check_space(job)
        self._run(job)
        return job

    def cancel(self, job_id: str) -> None:
        """Stop the job and delete what it had downloaded so far (finished files stay)."""
        with self._lock:
            job = self.jobs.pop(job_id, None)
            proc = self._procs.pop(job_id, None)
        if job is None:
            return
        job.state, job.message = State.CANCELLED, "Cancelled."
        if proc is not None:
            proc.kill()
            proc.wait()
        for f in job.files:
            partial_path(Path(job.dest), f.path).unlink(missing_ok=True)
        self._save()
        self._tell(job)

    def close(self, why: str = "Paused: Resume goes on where it was.") -> None:
        """Stop every running child; their jobs stay, paused, to resume later (or at the next start)."""
        with self._lock:
            procs, self._procs = dict(self._procs), {}
        for job_id, proc in procs.items():
            proc.kill()
            proc.wait()
            job = self.jobs.get(job_id)
            if job is not None:
                job.state, job.message, job.speed, job.eta_s = State.PAUSED, why, 0.0, None
                self._tell(job)
        if procs:
            self._save()

    def left(self, job: Job) -> int:
        """Bytes still to fetch: the files not on disk, less their partial downloads."""
        dest = Path(job.dest)
        todo = [f for f in job.files if f.path not in job.finished]
        partial = sum(p.stat().st_size for f in todo if (p := partial_path(dest, f.path)).is_file())
        missing = sum(f.size for f in todo)
        return max(missing - partial, 0)

    # ------------------------------------------------------------------ the child

    def _run(self, job: Job) -> None:
        names = [f.path for f in job.files if f.path not in job.finished]
        Path(job.dest).mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen(self._command("get", job.repo_id, job.revision, job.dest, *names), env=self._env(),
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        with self._lock:
            self._procs[job.id] = proc
        job.state, job.message, job.speed, job.eta_s = State.RUNNING, "Starting…", 0.0, None
        self._save()
        self._tell(job)
        threading.Thread(target=self._read, args=(job, proc), name=f"download-{job.id}", daemon=True).start()

    def _read(self, job: Job, proc: subprocess.Popen) -> None:
        rate, sizes, error = Rate(), {f.path: f.size for f in job.files}, ""
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if "done" in event:
                before = sum(sizes.get(n, 0) for n in job.finished if n != event["file"])
                job.done = before + int(event["done"])
                rate.add(self._clock(), job.done)
                job.speed, job.eta_s = rate.speed(), rate.eta_s(job.total - job.done)
                job.message = "Checking the checksum…" if event.get("checking") else ""
            elif "verified" in event:
                job.finished.append(event["verified"])
                self._save()
            elif "error" in event:
                error = event["error"]
            self._tell(job)
        proc.wait()
        with self._lock:
            mine = self._procs.pop(job.id, None) is proc
        if not mine:  # cancelled or closed: they said what happened
            return
        if len(job.finished) == len(job.files):
            job.state, job.message, job.done = State.DONE, f"Downloaded to {job.dest}.", job.total
        else:
            job.state = State.PAUSED
            job.message = error or f"The download stopped (exit code {proc.returncode}). Resume goes on where it was."
        job.speed, job.eta_s = 0.0, None
        self._save()
        self._tell(job)

    def _command(self, *args: str) -> list[str]:
        return [self._python, "-m", "desktop.models.download_child", *args]

    @staticmethod
    def _env() -> dict[str, str]:
        return {**os.environ, "HF_HUB_OFFLINE": "0", "HF_HUB_DISABLE_TELEMETRY": "1"}

    # ------------------------------------------------------------------ checks

    def _check_allowed(self) -> None:
        if not self._allowed():
            raise OmnideskError(NETWORK_OFF, code="network_off")

    def _check_space(self, job: Job) -> None:
        from desktop.model.hardware import disk_free

        need, free = self.left(job), disk_free(Path(job.dest))
        if need > free:
            raise OmnideskError(f"Not enough disk space for {job.title}: it needs {human_bytes(need)} more, "
                                f"but only {human_bytes(free)} is free on the disk of {job.dest}.", code="disk_full")

    # ------------------------------------------------------------------ state on disk

    def _tell(self, job: Job) -> None:
        for listener in list(self.listeners):
            try:
                listener(job)
            except Exception:  # noqa: BLE001 - a broken listener does not stop the download
                log.exception("A download listener failed")

    def _load(self) -> dict[str, Job]:
        try:
            data = load_json(self._path, MAX_BYTES)
            jobs = {}
            for item in data.get("jobs", []):
                files = [HubFile(**f) for f in item.pop("files")]
                job = Job(**{**item, "files": files, "state": State.PAUSED, "speed": 0.0, "eta_s": None})
                if not job.message:
                    job.message = "Stopped when Omnidesk closed: Resume goes on where it was."
                jobs[job.id] = job
            return jobs
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            log.warning("The downloads list %s could not be read (%s): it starts empty", self._path, exc)
            return {}

    def _save(self) -> None:
        with self._lock:
            kept = [{**asdict(j), "state": j.state.value} for j in self.jobs.values() if j.state != State.DONE]
        data = {"jobs": kept}
        try:
            write_atomic(self._path, json.dumps(data, indent=1))
        except OSError as exc:
            log.warning("Could not save the downloads list %s: %s", self._path, exc)


def _last_event(stdout: str) -> dict:
    for line in reversed(stdout.strip().splitlines()):
        try:
            event = json.loads(line)
            if isinstance(event, dict):
                return event
        except ValueError:
            continue
    return {}
