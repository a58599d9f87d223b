"""The download process: the only place that goes online, started by download.py with
HF_HUB_OFFLINE=0 (the app's own process stays offline). `list REPO REV` prints the repo's files;
`get REPO REV DEST FILE…` downloads them into DEST with huggingface_hub's HTTP client (each through
a partial file that a later run resumes), checks each against the Hub's sha256 (LFS) or git blob
id before it takes its name, and prints one
JSON line per event: {"file", "done", "total"} while it runs, {"verified"}, {"error"}."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

from tqdm import tqdm

EMIT_S = 0.2
PARTIAL_DIR = ".partial"
CHUNK = 256 << 10  # huggingface_hub reads 10 MB at a time: progress (and a resume point) every 256 KB instead
_current = {"file": ""}


def emit(**event) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


class Report(tqdm):
    """huggingface_hub's progress bar, reporting on stdout instead of drawing."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.update(file=open(os.devnull, "w"), disable=False)
        super().__init__(*args, **kwargs)
        self._last = 0.0

    def update(self, n: float | None = 1) -> bool | None:
        out = super().update(n)
        now = time.monotonic()
        if now - self._last >= EMIT_S or (self.total and self.n >= self.total):
            self._last = now
            emit(file=_current["file"], done=int(self.n), total=int(self.total or 0))
        return out


def listing(repo: str, revision: str) -> list[dict]:
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile

    out = []
    for item in HfApi().list_repo_tree(repo, revision=revision, recursive=True):
        if isinstance(item, RepoFile):
            out.append({"path": item.path, "size": int(item.size), "blob_id": item.blob_id or "",
                        "sha256": item.lfs.sha256 if item.lfs is not None else ""})
    return out


def get(repo: str, revision: str, dest: Path, names: list[str]) -> None:
    files = {f["path"]: f for f in listing(repo, revision)}
    for name in names:
        if name not in files:
            raise LookupError(f"The Hub has no file {name} in {repo}.")
        _current["file"] = name
        fetch(repo, revision, dest, files[name])
        emit(verified=name)


def fetch(repo: str, revision: str, dest: Path, entry: dict) -> Path:
    """One file into dest, through a partial file that survives a failure or a restart (the
    library's own temporary file is unique to each process and deleted on failure, so it never
    resumes across runs): huggingface_hub's http_get continues it with a Range request."""
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url
    from huggingface_hub.file_download import http_get
    from huggingface_hub.utils import build_hf_headers

    name, size = entry["path"], int(entry["size"])
    target, part = dest / name, partial_path(dest, name)
    if target.is_file() and target.stat().st_size == size and matches(target, entry):
        return target  # finished in an earlier run
    constants.DOWNLOAD_CHUNK_SIZE = CHUNK
    part.parent.mkdir(parents=True, exist_ok=True)
    meta = get_hf_file_metadata(hf_hub_url(repo, name, revision=revision))
    resume = part.stat().st_size if part.exists() else 0
    if resume > size:  # not this file's partial download
        part.unlink()
        resume = 0
    with part.open("ab") as f:
        http_get(meta.location, f, resume_size=resume, headers=build_hf_headers(), expected_size=size,
                 displayed_filename=name, tqdm_class=Report)
    emit(file=name, done=size, total=size, checking=True)
    if not matches(part, entry):
        part.unlink(missing_ok=True)
        raise ValueError(f"{name} did not match the Hub's checksum, so it was deleted: download it again.")
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(part, target)
    return target


def partial_path(dest: Path, name: str) -> Path:
    """Where a file's download grows until it is complete and checked (hidden from the catalog)."""
    return dest / PARTIAL_DIR / f"{name}.part"


def matches(path: Path, entry: dict) -> bool:
    """The file against the Hub's sha256 (LFS files) or its git blob id (small files)."""
    if entry.get("sha256"):
        digest = hashlib.sha256()
    elif entry.get("blob_id"):
        digest = hashlib.sha1(b"blob %d\0" % path.stat().st_size)
    else:
        return True
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest() == (entry.get("sha256") or entry.get("blob_id"))


def sentence(exc: BaseException, repo: str) -> str:
    from huggingface_hub.errors import EntryNotFoundError, GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    if isinstance(exc, GatedRepoError):
        return f"{repo} is gated: accept its licence on the Hub and log in (hf auth login) first."
    if isinstance(exc, RepositoryNotFoundError):
        return f"There is no model {repo} on the Hub (or it is private)."
    if isinstance(exc, RevisionNotFoundError):
        return f"{repo} has no such revision."
    if isinstance(exc, EntryNotFoundError):
        return f"A file of {repo} is not on the Hub any more."
    if getattr(getattr(exc, "response", None), "status_code", None) == 404:
        return f"There is no model {repo} on the Hub, or not at that revision."
    if isinstance(exc, (LookupError, ValueError)):
        return str(exc)
    if isinstance(exc, OSError) and getattr(exc, "errno", None) == 28:
        return "The disk is full: free some space, then resume."
    if isinstance(exc, (ConnectionError, OSError, TimeoutError)) or type(exc).__module__.startswith(("httpx", "httpcore")):
        return f"The Hub could not be reached ({type(exc).__name__}: {str(exc)[:120]}). Resume when you are online."
    return f"The download failed ({type(exc).__name__}: {str(exc)[:160]})."


def main(argv: list[str]) -> int:
    command, repo, revision = argv[0], argv[1], argv[2]
    try:
        if command == "list":
            emit(files=listing(repo, revision))
        else:
            get(repo, revision, Path(argv[3]), argv[4:])
            emit(finished=True)
        return 0
    except Exception as exc:  # noqa: BLE001 - every failure becomes a sentence for the page
        emit(error=sentence(exc, repo))
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
