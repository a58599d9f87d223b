"""The Help menu's boxes: where the log folder is (when no file manager can show it) and About."""

from __future__ import annotations

import logging
from typing import Callable

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QDesktopServices, QGuiApplication
from PySide6.QtWidgets import QMessageBox, QWidget

from desktop import __version__
from desktop.logs import log_dir

log = logging.getLogger(__name__)


def open_log_folder(parent: QWidget, say: Callable[[str], None]) -> QMessageBox | None:
    """Show the log folder in the file manager; when that cannot be done, say where it is (the
    path selectable, with a Copy button). Returns that message box, if one was needed."""
    folder = log_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.warning("Cannot create the log folder %s: %s", folder, exc)
    if folder.is_dir() and QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder))):
        return None
    log.warning("Could not open the log folder %s with the desktop's file manager", folder)
    box = QMessageBox(QMessageBox.Icon.Information, "Log folder",
                      f"The log folder could not be shown in a file manager. It is here:\n\n{folder}",
                      QMessageBox.StandardButton.Close, parent)
    box.setTextFormat(Qt.TextFormat.PlainText)
    box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    copy = box.addButton("Copy path", QMessageBox.ButtonRole.ActionRole)
    copy.clicked.connect(lambda: (QGuiApplication.clipboard().setText(str(folder)), say(f"Copied {folder}")))
    box.finished.connect(box.deleteLater)
    box.open()
    return box


def about_box(parent: QWidget) -> QMessageBox:
    box = QMessageBox(QMessageBox.Icon.Information, "About Omnidesk",
                      f"<b>Omnidesk {__version__}</b><br>A private assistant that runs on your own computer. "
                      "Conversations and their cache stay on this machine.", QMessageBox.StandardButton.Ok, parent)
    box.finished.connect(box.deleteLater)
    return box
