"""One Omnidesk window per user and config folder: the first launch holds a lock file and listens on
a local socket; a second launch asks it to bring its window to the front, then exits."""

from __future__ import annotations

import getpass
import hashlib
import logging
import sys
import time
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QLockFile, QObject, Qt, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket
from PySide6.QtWidgets import QApplication, QMainWindow, QWidget

log = logging.getLogger(__name__)

REQUEST = b"raise\n"
ANSWER = b"ok\n"
LOCK_NAME = "instance.lock"


def server_name(config_dir: Path) -> str:
    """The local socket's name: one per user and config folder (a hash: no odd characters)."""
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name in the environment: the folder still tells
        user = ""
    key = f"{user}\0{Path(config_dir).expanduser().resolve()}".encode("utf-8", "surrogateescape")
    return "omnidesk-" + hashlib.sha256(key).hexdigest()[:20]


def main_window() -> QWidget | None:
    """The app's main window: the first shown top-level QMainWindow (a minimised one counts)."""
    return next((w for w in QApplication.topLevelWidgets() if isinstance(w, QMainWindow) and w.isVisible()), None)


def bring_to_front(window: QWidget | None) -> None:
    """Show `window` un-minimised and ask for the focus (a window manager may only flash it)."""
    if window is None:
        return
    window.setWindowState((window.windowState() & ~Qt.WindowState.WindowMinimized) | Qt.WindowState.WindowActive)
    window.show()
    window.raise_()
    window.activateWindow()
    QApplication.alert(window)


class SingleInstance(QObject):
    """`acquire()` decides who runs: True for the first instance, which then `listen()`s once the
    QApplication exists: whenever a later launch calls `hand_over()`, it emits `activated` and
    brings its window to the front."""

    activated = Signal()

    def __init__(self, config_dir: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.config_dir = Path(config_dir)
        self.name = server_name(self.config_dir)
        self._lock = QLockFile(str(self.config_dir / LOCK_NAME))
        self._lock.setStaleLockTime(0)  # stale only when the process that holds it is gone
        self._server: QLocalServer | None = None

    def acquire(self) -> bool:
        """True when no other instance runs for this user and folder (this one now holds the lock)."""
        self.config_dir.mkdir(parents=True, exist_ok=True)
        if self._lock.tryLock(0):
            return True
        if self._lock.error() != QLockFile.LockError.LockFailedError:  # unwritable folder: run anyway
            log.warning("Could not create the instance lock in %s (%s); not checking for another instance",
                        self.config_dir, self._lock.error().name)
            return True
        return False

    def listen(self, window: Callable[[], QWidget | None] = main_window) -> None:
        """Take requests from later launches (call with the QApplication built); each brings
        `window()` to the front. A socket left by a crashed instance is removed first: holding the
        lock proves that no live instance owns it."""
        self.activated.connect(lambda: bring_to_front(window()))
        server = self._server = QLocalServer(self)
        server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        QLocalServer.removeServer(self.name)
        if not server.listen(self.name):
            log.warning("A second launch cannot reach this window: %s", server.errorString())
        server.newConnection.connect(self._accept)

    def hand_over(self, timeout_s: float = 5.0) -> bool:
        """(A later launch) ask the running instance to raise its window; True when it answered.
        It is retried for `timeout_s`: the first instance may still be starting up. Waits are
        short slices with sleeps between: Qt's blocking waits keep Python's GIL."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            sock = QLocalSocket()
            sock.connectToServer(self.name)
            if sock.waitForConnected(200):
                sock.write(REQUEST)
                answer = b""
                while ANSWER not in answer and time.monotonic() < deadline:
                    if sock.state() != QLocalSocket.LocalSocketState.ConnectedState and not sock.bytesAvailable():
                        break
                    sock.waitForReadyRead(20)
                    answer += bytes(sock.readAll().data())
                    time.sleep(0.005)
                sock.abort()
                if ANSWER in answer:
                    return True
            time.sleep(0.1)
        return False

    def release(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        self._lock.unlock()

    def _accept(self) -> None:
        assert self._server is not None
        while (sock := self._server.nextPendingConnection()) is not None:
            # No Python closure holds the socket: Qt owns and deletes it (a lambda here made a
            # cycle that the garbage collector broke by deleting the socket a second time).
            sock.readyRead.connect(self._ready)
            sock.disconnected.connect(sock.deleteLater)
            self._answer(sock)

    def _ready(self) -> None:
        sock = self.sender()
        if isinstance(sock, QLocalSocket):
            self._answer(sock)

    def _answer(self, sock: QLocalSocket) -> None:
        if not sock.canReadLine():
            if sock.bytesAvailable() > 64:  # not one of ours
                sock.abort()
            return
        if bytes(sock.readLine().data()) == REQUEST:
            sock.write(ANSWER)
            sock.flush()
            log.info("Another launch asked for this window")
            self.activated.emit()
        sock.disconnectFromServer()


def second_launch(instance: SingleInstance) -> int:
    """What a launch does while another instance runs: ask it to show its window, say so, and
    return the exit status (0 when it answered)."""
    if instance.hand_over():
        log.info("Omnidesk is already running; its window was brought to the front")
        print("omnidesk: already running; its window was brought to the front.", file=sys.stderr)
        return 0
    message = (f"Omnidesk is already running for this user ({instance.config_dir / LOCK_NAME}) but did not "
               "answer within 5 seconds. Close it, or end its process, then start Omnidesk again.")
    log.error("%s", message)  # on stderr too (desktop.logs)
    return 1
