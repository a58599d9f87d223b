"""Push-to-talk: Space held anywhere on the Call page (or the Hold to talk button held) is the
user's turn — the call's key_down once on press and key_up once on release, the platform's
auto-repeats ignored, and a key still held when the page is hidden or loses focus released."""

from __future__ import annotations

from typing import Any, Callable, Iterable

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QWidget

KEYS = (QEvent.Type.KeyPress, QEvent.Type.KeyRelease)


class PushToTalk(QObject):
    """`target()` is the call to talk to, or None while push-to-talk is off (another mode, no
    call): then Space is an ordinary key. `held` says whether the user is talking."""

    def __init__(self, target: Callable[[], Any], page: QWidget) -> None:
        super().__init__(page)
        self._target, self._page = target, page
        self._call: Any = None  # the call that got key_down
        page.installEventFilter(self)

    @property
    def held(self) -> bool:
        return self._call is not None

    def watch(self, widgets: Iterable[QWidget]) -> None:
        """Space on these (the page's buttons, lists, …) talks too, and does not click them."""
        for widget in widgets:
            widget.installEventFilter(self)

    def press(self) -> None:
        call = self._target()
        if self._call is None and call is not None:
            self._call = call
            call.key_down()

    def release(self) -> None:
        call, self._call = self._call, None
        if call is not None:
            call.key_up()

    def forget(self) -> None:
        """The call ended: nothing to release."""
        self._call = None

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        kind = event.type()
        if kind in KEYS and isinstance(event, QKeyEvent) and event.key() == Qt.Key.Key_Space:
            if self._target() is None and self._call is None:
                return False
            if not event.isAutoRepeat():
                self.press() if kind == QEvent.Type.KeyPress else self.release()
            return True
        if watched is self._page and (kind == QEvent.Type.Hide or (
                kind == QEvent.Type.ActivationChange and not self._page.isActiveWindow())):
            self.release()  # its key-up would go to another window or page
        return False
