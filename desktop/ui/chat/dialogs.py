"""The chat page's modal questions (file choosers, delete confirmation) in one place, so that
tests can answer them. The file choosers block: call them from plain slots only, never inside an
asyncio task; the confirmation is opened with open() and answers through a callback."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QStandardPaths
from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from desktop.ui.plain import plain

IMAGE_FILTER = "Images (*.png *.jpg *.jpeg *.webp *.bmp *.gif)"
EXPORT_FILTERS = "Markdown (*.md);;JSON (*.json)"


def ask_images(parent: QWidget) -> list[str]:
    paths, _ = QFileDialog.getOpenFileNames(parent, "Attach images", "", IMAGE_FILTER)
    return paths


def suggested_file_name(title: str) -> str:
    stem = re.sub(r"[^\w\- ]+", "", title).strip()[:60] or "conversation"
    return f"{stem}.md"


def export_folder() -> Path:
    """Where the export dialog opens: the user's Documents folder (the home folder without one),
    never the folder the app was started from."""
    docs = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
    return Path(docs) if docs and Path(docs).is_dir() else Path.home()


def ask_export_path(parent: QWidget, title: str) -> str | None:
    """The file to export to; its suffix (.md or .json) picks the format. None when cancelled."""
    suggested = str(export_folder() / suggested_file_name(title))
    path, chosen = QFileDialog.getSaveFileName(parent, "Export conversation", suggested, EXPORT_FILTERS)
    if not path:
        return None
    if not path.lower().endswith((".md", ".markdown", ".json")):
        path += ".json" if chosen.startswith("JSON") else ".md"
    return path


def confirm_delete(parent: QWidget, title: str, on_yes: Callable[[], None]) -> QMessageBox:
    """Ask before deleting (window-modal, never a nested event loop); `on_yes` runs once the user
    says Delete. The title shows exactly as typed, never as markup. Returns the open box."""
    box = QMessageBox(QMessageBox.Icon.Question, "Delete conversation", f"Delete “{title or 'New conversation'}”?",
                      QMessageBox.StandardButton.Cancel, parent)
    plain(box)
    box.setInformativeText("Its messages are removed from this computer; this cannot be undone.")
    box.addButton("Delete", QMessageBox.ButtonRole.DestructiveRole)
    box.setDefaultButton(QMessageBox.StandardButton.Cancel)
    box.buttonClicked.connect(lambda button: box.buttonRole(button) == QMessageBox.ButtonRole.DestructiveRole and on_yes())
    box.finished.connect(box.deleteLater)
    box.open()
    return box
