"""The chat page's modal questions (file choosers, delete confirmation) in one place, so that
tests can answer them. Call them from plain slots only, never inside an asyncio task."""

from __future__ import annotations

import re

from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

IMAGE_FILTER = "Images (*.png *.jpg *.jpeg *.webp *.bmp *.gif)"
EXPORT_FILTERS = "Markdown (*.md);;JSON (*.json)"


def ask_images(parent: QWidget) -> list[str]:
    paths, _ = QFileDialog.getOpenFileNames(parent, "Attach images", "", IMAGE_FILTER)
    return paths


def suggested_file_name(title: str) -> str:
    stem = re.sub(r"[^\w\- ]+", "", title).strip()[:60] or "conversation"
    return f"{stem}.md"


def ask_export_path(parent: QWidget, title: str) -> str | None:
    """The file to export to; its suffix (.md or .json) picks the format. None when cancelled."""
    path, chosen = QFileDialog.getSaveFileName(parent, "Export conversation", suggested_file_name(title), EXPORT_FILTERS)
    if not path:
        return None
    if not path.lower().endswith((".md", ".markdown", ".json")):
        path += ".json" if chosen.startswith("JSON") else ".md"
    return path


def confirm_delete(parent: QWidget, title: str) -> bool:
    answer = QMessageBox.question(
        parent, "Delete conversation",
        f"Delete “{title or 'New conversation'}”?\nIts messages are removed from this computer; this cannot be undone.",
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel, QMessageBox.StandardButton.Cancel)
    return answer == QMessageBox.StandardButton.Yes
