"""Logging set-up for the app: a rotating log file in the platform's user log folder (or
$OMNIDESK_LOG_DIR) plus warnings on stderr. Qt-free; safe to call more than once."""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
from pathlib import Path

APP = "omnidesk"
LOG_NAME = "omnidesk.log"
MAX_BYTES = 2 << 20  # per file; with BACKUPS older files, at most ~8 MB on disk
BACKUPS = 3
FORMAT = "%(asctime)s %(levelname)-7s %(threadName)s %(name)s: %(message)s"
_MARK = "_omnidesk_handler"
# Loggers whose INFO lines are noise, so that only their warnings reach the log: httpx/httpcore write
# a line per HTTP request (remote health checks every 5 s), faster_whisper one per transcription
# pass (a call's partial transcripts: thousands an hour).
QUIET = ("httpx", "httpcore", "faster_whisper")


def log_dir() -> Path:
    """Where the log files go: $OMNIDESK_LOG_DIR, else platformdirs' user_log_dir("omnidesk")."""
    override = os.environ.get("OMNIDESK_LOG_DIR")
    if override:
        return Path(override).expanduser()
    from platformdirs import user_log_dir

    return Path(user_log_dir(APP))


def log_path() -> Path:
    return log_dir() / LOG_NAME


def setup_logging(level: int = logging.INFO, *, stderr_level: int = logging.WARNING) -> Path:
    """Attach the rotating file handler (and a stderr one) to the root logger once; returns the
    log file's path. A second call with another log folder moves the file handler there."""
    path = log_path()
    root = logging.getLogger()
    if root.level == logging.NOTSET or root.level > level:
        root.setLevel(level)
    for name in QUIET:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))
    for handler in [h for h in root.handlers if getattr(h, _MARK, False)]:
        if isinstance(handler, logging.handlers.RotatingFileHandler) and Path(handler.baseFilename) == path:
            return path
        root.removeHandler(handler)
        handler.close()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        file_handler: logging.Handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8", delay=True)
    except OSError as exc:  # a read-only home must not stop the app
        print(f"omnidesk: cannot write the log file {path}: {exc}", file=sys.stderr)
        file_handler = logging.NullHandler()
    file_handler.setLevel(level)
    file_handler.setFormatter(logging.Formatter(FORMAT))
    console = logging.StreamHandler(sys.stderr)
    console.setLevel(stderr_level)
    console.setFormatter(logging.Formatter("omnidesk: %(levelname)s %(name)s: %(message)s"))
    for handler in (file_handler, console):
        setattr(handler, _MARK, True)
        root.addHandler(handler)
    logging.captureWarnings(True)
    return path


def log_failure(message: str, exc: BaseException | None = None) -> int:
    """Record why the app could not start or go on: the sentence on stderr and in the log file,
    the traceback (if any) in the file only. Returns the exit status, 1."""
    logger = logging.getLogger("desktop.start")
    logger.critical("%s", message)
    if exc is not None:
        logger.info("Details of the failure above:", exc_info=exc)  # INFO: the file, not the terminal
    flush_logs()
    print(f"omnidesk: the log file is {log_path()}", file=sys.stderr)
    return 1


def flush_logs() -> None:
    """Flush every handler set up here (tests read the file right after logging)."""
    for handler in logging.getLogger().handlers:
        if getattr(handler, _MARK, False):
            handler.flush()
