"""The main window: sidebar navigation over Chat, Call, Recordings, Admin and Models, the menus and
keyboard shortcuts, the model-loading banner above the chat, and the status bar."""

from __future__ import annotations

import logging
from typing import Callable

from PySide6.QtCore import QByteArray, QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeyEvent, QKeySequence
from PySide6.QtWidgets import QHBoxLayout, QMainWindow, QMessageBox, QStackedWidget, QVBoxLayout, QWidget

from desktop.settings import Settings
from desktop.ui.admin.format import loading_fraction
from desktop.gateway.monitor import Snapshot
from desktop.ui.admin.panel import AdminPanel, Cancel
from desktop.ui.help_boxes import about_box, open_log_folder
from desktop.ui.icons import app_icon
from desktop.ui.loading_banner import LoadingBanner
from desktop.ui.nav import KEYS, NavBar
from desktop.ui.placeholder import call_page as coming_soon_call, models_page as coming_soon_models
from desktop.ui.placeholder import recordings_page as coming_soon_recordings
from desktop.ui.plain import html_text
from desktop.ui.shortcuts import ShortcutsDialog, binds, sequence, window_shortcuts
from desktop.ui.status_bar import StatusBar
from desktop.ui.theme import WINDOW_CSS

log = logging.getLogger(__name__)
REFRESH_MS = 500
WAIT_HINT = "You can read your conversations meanwhile; messages you send now wait until it is ready."


class MainWindow(QMainWindow):
    """`snapshot()` is polled every REFRESH_MS (None while no engine runs). Emits
    `settings_requested` (Ctrl+,) and `closed` once the window has closed (Ctrl+Q or the
    close button); `saved_state()` gives what to remember in the settings."""

    settings_requested = Signal()
    closed = Signal()

    def __init__(self, settings: Settings, snapshot: Callable[[], Snapshot | None],
                 cancel: Cancel | None = None, parent: QWidget | None = None, *,
                 call_page: QWidget | None = None, recordings_page: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Omnidesk")
        self.setWindowIcon(app_icon())
        self.setStyleSheet(WINDOW_CSS)
        self._snapshot = snapshot
        self._phase: str | None = None
        self._error: str | None = None
        self.chat_page: QWidget = QWidget()
        self.nav = NavBar()
        self.banner = LoadingBanner()
        self.banner.settings_requested.connect(self.settings_requested)
        self.admin = AdminPanel(cancel)
        self.status = StatusBar()
        self.setStatusBar(self.status)
        self.admin.status.connect(self.show_message)

        chat_area = QWidget()
        self._chat_layout = QVBoxLayout(chat_area)
        self._chat_layout.setContentsMargins(0, 0, 0, 0)
        self._chat_layout.setSpacing(0)
        self._chat_layout.addWidget(self.banner)
        self._chat_layout.addWidget(self.chat_page, 1)
        self.stack = QStackedWidget()
        self.pages = {"chat": chat_area, "call": coming_soon_call(), "recordings": coming_soon_recordings(), "admin": self.admin,
                      "models": coming_soon_models()}
        for key in KEYS:
            self.stack.addWidget(self.pages[key])
        central = QWidget()
        row = QHBoxLayout(central)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(0)
        row.addWidget(self.nav)
        row.addWidget(self.stack, 1)
        self.setCentralWidget(central)
        self.nav.page_selected.connect(self._page_selected)
        self.nav.itemClicked.connect(lambda _item: self.current_page == "chat" and self._call_chat("focus_composer"))
        if call_page is not None:
            self.set_call_page(call_page)
        if recordings_page is not None:
            self.set_recordings_page(recordings_page)

        self.actions: dict[str, QAction] = {}
        self._build_actions()
        self._build_menus()
        self._restore(settings)
        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.timer.timeout.connect(self.refresh)
        self.timer.start()

    # ------------------------------------------------------------------ pages

    def set_chat_page(self, page: QWidget) -> None:
        """Put the chat page (or a stand-in) under the loading banner, replacing the previous one."""
        old, self.chat_page = self.chat_page, page
        self._chat_layout.replaceWidget(old, page)
        old.setParent(None)
        old.deleteLater()
        if hasattr(page, "status"):
            page.status.connect(self.show_message)
        if self.current_page == "chat":
            self._call_chat("focus_composer")  # the keys go to the message box from the start

    def set_call_page(self, page: QWidget) -> None:
        """Put the Call page (the "coming soon" one until then) in its place in the stack."""
        self.set_page("call", page)

    def set_recordings_page(self, page: QWidget) -> None:
        """Put the Recordings page (the "coming soon" one until then) in its place in the stack."""
        self.set_page("recordings", page)

    def set_page(self, key: str, page: QWidget) -> None:
        """Replace the page shown for `key` in the stack; its `status` signal, if any, goes to the
        status bar."""
        old = self.pages[key]
        shown = self.stack.currentWidget() is old
        self.stack.insertWidget(self.stack.indexOf(old), page)
        self.stack.removeWidget(old)
        old.deleteLater()
        self.pages[key] = page
        if shown:
            self.stack.setCurrentWidget(page)
        if hasattr(page, "status"):
            page.status.connect(self.show_message)

    def show_page(self, key: str) -> None:
        self.nav.select(key)

    @property
    def current_page(self) -> str:
        return KEYS[self.stack.currentIndex()]

    def _page_selected(self, key: str) -> None:
        self.stack.setCurrentWidget(self.pages[key])
        if key == "admin":
            self.refresh()
        elif key == "chat":  # back on the chat (sidebar, Ctrl+1): typing goes to the message box
            self._call_chat("focus_composer")

    # ------------------------------------------------------------------ engine state

    def set_model(self, name: str | None, detail: str = "") -> None:
        self.status.set_model(name, detail)
        # End with the app's name: X11 and Windows append the display name to a title that does
        # not already end with it, which made "Omnidesk · model — Omnidesk".
        self.setWindowTitle(f"{name} — Omnidesk" if name else "Omnidesk")

    @property
    def phase(self) -> str | None:
        return self._phase

    def set_phase(self, text: str | None) -> None:
        """What the app does while no engine is there (e.g. restarting the model); None: done."""
        self._phase = text
        self.refresh()

    def set_error(self, text: str | None) -> None:
        """An engine that could not even start (None clears it)."""
        self._error = text
        self.refresh()

    def show_message(self, text: str) -> None:
        self.status.say(text)

    def refresh(self) -> None:
        snap = self._snapshot()
        self.status.show_snapshot(snap, self._phase)
        self._update_banner(snap)
        if self.current_page == "admin":
            self.admin.show_snapshot(snap)

    def _update_banner(self, snap: Snapshot | None) -> None:
        if self._phase:
            self.banner.show_progress(f"<b>{html_text(self._phase)}</b>", None)
            return
        workers = snap.workers if snap is not None else []
        if any(w.state in ("idle", "busy") for w in workers):
            self.banner.hide()
            return
        loading = [w for w in workers if w.state == "loading"]
        errors = [w for w in workers if w.state == "error"]
        if loading:
            message = loading[0].message or "Loading the model…"
            self.banner.show_progress(f"<b>{html_text(message)}</b><br>{WAIT_HINT}", loading_fraction(message))
        elif errors or self._error:
            why = errors[0].message if errors else self._error
            self.banner.show_error(f"<b>The model could not be loaded.</b> {html_text(why or '')}")
        else:
            self.banner.hide()

    # ------------------------------------------------------------------ actions

    def _build_actions(self) -> None:
        handlers: dict[str, Callable[[], None]] = {
            "new_chat": self.new_chat, "search": self.search, "stop": self.stop_reply,
            "rename": lambda: self._on_chat("rename_current"), "delete": lambda: self._on_chat("delete_current"),
            "voice": lambda: self._call_chat("toggle_voice"),
            "settings": self.settings_requested.emit, "shortcuts": self.show_shortcuts, "quit": self.close,
        }
        for key in KEYS:
            handlers[f"page_{key}"] = lambda key=key: self.show_page(key)
        # One binding per key: an action binds the keys the window owns; for a key a widget binds
        # itself (the list's Del, the Voice button's Ctrl+Shift+V) or handles in keyPressEvent (Esc),
        # the menu item only shows it after a tab, or Qt would find two shortcuts and fire neither.
        for sc in window_shortcuts():
            action = QAction(sc.menu or sc.text, self)
            if binds(sc):
                action.setShortcut(sequence(sc))
            else:
                action.setText(f"{action.text()}\t{sequence(sc).toString(QKeySequence.SequenceFormat.NativeText)}")
            action.triggered.connect(lambda _checked=False, fn=handlers[sc.action]: fn())
            self.addAction(action)  # shortcuts work even with the menu bar hidden
            self.actions[sc.action] = action
        self.actions["voice"].setCheckable(True)  # follows the Voice button when the Chat menu opens
        rename = self.actions["rename"]  # F2 where the conversations are, not on Admin or Recordings
        self.removeAction(rename)
        rename.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self.pages["chat"].addAction(rename)
        export = QAction("Export conversation…", self)
        export.triggered.connect(lambda: self._on_chat("export_current"))
        self.actions["export"] = export
        self.actions["settings"].setMenuRole(QAction.MenuRole.PreferencesRole)
        self.actions["quit"].setMenuRole(QAction.MenuRole.QuitRole)

    def _build_menus(self) -> None:
        a, bar = self.actions, self.menuBar()
        file = bar.addMenu("&File")
        for name in ("new_chat", "settings", None, "quit"):
            file.addAction(a[name]) if name else file.addSeparator()
        chat = bar.addMenu("&Chat")
        for name in ("search", "stop", None, "rename", "export", "delete", None, "voice"):
            chat.addAction(a[name]) if name else chat.addSeparator()
        chat.aboutToShow.connect(self._update_chat_menu)
        self.chat_menu = chat
        view = bar.addMenu("&View")
        view.addActions([a[f"page_{k}"] for k in KEYS])
        help_menu = bar.addMenu("&Help")
        help_menu.addAction(a["shortcuts"])
        help_menu.addAction("Open log folder", self.open_log_folder)
        help_menu.addAction("About Omnidesk", self.show_about)

    def _update_chat_menu(self) -> None:
        """The Voice item shows the voice's state, and is off where the chat page has no voice.
        (Rename, Export and Delete stay on: F2 must keep working; on a conversation not saved yet
        they say so in the status bar.)"""
        state = getattr(self.chat_page, "voice_state", None)
        available, on = state() if callable(state) else (False, False)
        self.actions["voice"].setEnabled(available)
        self.actions["voice"].setChecked(on)

    def _on_chat(self, method: str) -> None:
        """A conversation action from the menu bar (or F2): it acts on the chat page's open conversation."""
        self.show_page("chat")
        self._call_chat(method)

    def _call_chat(self, method: str) -> None:
        fn = getattr(self.chat_page, method, None)
        if callable(fn):
            fn()

    def new_chat(self) -> None:
        self.show_page("chat")
        self._call_chat("new_conversation")
        self._call_chat("focus_composer")

    def search(self) -> None:
        self.show_page("chat")
        self._call_chat("focus_search")

    def stop_reply(self) -> None:
        self._call_chat("stop")

    def show_shortcuts(self) -> ShortcutsDialog:
        dialog = ShortcutsDialog(self)
        dialog.finished.connect(dialog.deleteLater)
        dialog.open()
        return dialog

    def open_log_folder(self) -> QMessageBox | None:
        """Show the log folder in the file manager, or a box saying where it is (returned)."""
        return open_log_folder(self, self.show_message)

    def show_about(self) -> None:
        about_box(self).open()

    # ------------------------------------------------------------------ state and closing

    def _restore(self, settings: Settings) -> None:
        geometry = settings.window_geometry
        if not (geometry and self.restoreGeometry(QByteArray.fromBase64(geometry.encode("ascii")))):
            self.resize(1120, 740)
        last = getattr(settings, "last_page", None)
        self.show_page(last if last in KEYS else "chat")

    def saved_state(self) -> dict[str, str]:
        """Settings fields to remember: window geometry (base64) and the page shown last."""
        return {"window_geometry": bytes(self.saveGeometry().toBase64().data()).decode("ascii"),
                "last_page": self.current_page}

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Escape and event.modifiers() == Qt.KeyboardModifier.NoModifier:
            self.stop_reply()  # an Esc that no focused widget took (see shortcuts.SHORTCUTS)
            return
        super().keyPressEvent(event)

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.PaletteChange:
            self.setStyleSheet(WINDOW_CSS)  # re-resolve palette() entries after a theme switch
        super().changeEvent(event)

    def closeEvent(self, event: QCloseEvent) -> None:
        self.timer.stop()
        event.accept()
        super().closeEvent(event)
        self.closed.emit()
