"""PySide6 6.12 on Python 3.11 steals a reference to None on every void method call; the chat page
lost ~20 per streamed token and the app died ("deallocating None") after ~3,000 tokens. Importing
desktop.ui pins None first, so a long session survives."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.hardening

LONG_SESSION = """
import sys
from PySide6.QtWidgets import QApplication, QLabel
app = QApplication([])
import desktop.ui.chat.markdown_view  # what the app imports before its first widget
label = QLabel()
for i in range(300_000):  # about 15,000 streamed tokens' worth of void calls
    label.setText("x")
print("alive", sys.getrefcount(None) > 1 << 30 or sys.version_info >= (3, 12))
"""


def test_a_long_session_does_not_kill_none():
    run = subprocess.run([sys.executable, "-c", LONG_SESSION], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "QT_QPA_PLATFORM": "offscreen"})
    assert run.returncode == 0 and "alive True" in run.stdout, run.stderr[-2000:]
