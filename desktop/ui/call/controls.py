"""The call's buttons in two rows: Start/End (green/red), the mode, Mute, Pause/Resume, Listen now
and Hold to talk (push-to-talk); with no microphone, why the call cannot start, next to Start."""

from __future__ import annotations

from enum import Enum

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QSizePolicy, QVBoxLayout, QWidget

from desktop.call.state import CallMode, CallPhase
from desktop.ui import shortcuts

MODES = (
    (CallMode.DUPLEX, "Full duplex", "Talk any time; talking over the assistant interrupts it"),
    (CallMode.TURNS, "Turn-taking", "Take turns: the assistant finishes before it listens again"),
    (CallMode.PUSH_TO_TALK, "Push-to-talk", "Hold Space (or the Hold to talk button) while you speak"),
)
BUTTON_CSS = """
QPushButton#callButton { background: #2e9d57; color: white; border: none; border-radius: 6px;
                         padding: 6px 18px; font-weight: bold; }
QPushButton#callButton:hover { background: #278a4c; }
QPushButton#callButton[ending="true"] { background: #d64541; }
QPushButton#callButton[ending="true"]:hover { background: #bf3a36; }
QPushButton#callButton:disabled { background: #b9bcc0; color: #f4f4f4; }
"""


class Stage(str, Enum):
    IDLE = "idle"
    STARTING = "starting"
    IN_CALL = "in_call"
    ENDING = "ending"


class CallControls(QWidget):
    """Widgets only; the page connects them and calls `show_state` after every change."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.call_button = QPushButton("Start call")
        self.call_button.setObjectName("callButton")
        self.call_button.setStyleSheet(BUTTON_CSS)
        self.call_button.setMinimumWidth(self.call_button.fontMetrics().horizontalAdvance("Start call") + 48)
        self.mode = QComboBox()
        for mode, text, tip in MODES:
            self.mode.addItem(text, mode)
            self.mode.setItemData(self.mode.count() - 1, tip, Qt.ItemDataRole.ToolTipRole)
        self.mode.setToolTip("How turns pass between you and the assistant (can be changed during a call)")
        self.mode.setAccessibleName("Call mode")
        self.mute = QPushButton("Mute")
        self.mute.setCheckable(True)
        self.mute.setToolTip("Turn your microphone off and on; the call goes on")
        self.pause = QPushButton("Pause")
        self.pause.setToolTip("Stop listening and speaking for a while; the conversation is kept")
        self.listen = QPushButton("Listen now")
        self.listen.setToolTip("Stop the assistant's answer and listen to you")
        self.talk = QPushButton(f"Hold to talk ({shortcuts.native('push_to_talk')})")
        self.talk.setToolTip("Hold while you speak; let go when you are done")
        self.reason = QLabel()
        self.reason.setTextFormat(Qt.TextFormat.PlainText)
        self.reason.setWordWrap(True)
        policy = QSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        policy.setRetainSizeWhenHidden(True)
        self.reason.setSizePolicy(policy)
        # Two rows, so that the page fits beside the sidebar in a small window: the call and how
        # it runs; then what can be done during it.
        first, second = QHBoxLayout(), QHBoxLayout()
        first.setSpacing(12)
        first.addWidget(self.call_button)
        first.addWidget(self.reason, 1)  # the row's spare room, shown or not
        first.addWidget(QLabel("Mode:"))
        first.addWidget(self.mode)
        second.setSpacing(8)
        for button in (self.mute, self.pause, self.listen, self.talk):
            second.addWidget(button)
        second.addStretch(1)
        self._second = second
        rows = QVBoxLayout(self)
        rows.setContentsMargins(0, 0, 0, 0)
        rows.setSpacing(8)
        rows.addLayout(first)
        rows.addLayout(second)

    def add_button(self, button: QWidget) -> None:
        """Another control of the call (the camera), after the others on the second row."""
        self._second.insertWidget(self._second.count() - 1, button)

    @property
    def chosen_mode(self) -> CallMode:
        return CallMode(self.mode.currentData())

    def select_mode(self, mode: CallMode) -> None:
        self.mode.setCurrentIndex(self.mode.findData(CallMode(mode)))

    def show_state(self, stage: Stage, phase: CallPhase | None, mic_problem: str | None) -> None:
        """Enable what can work now: Start only with a microphone, the call's buttons in a call,
        Listen now while the assistant thinks or speaks, Hold to talk in push-to-talk mode."""
        in_call = stage is Stage.IN_CALL and phase is not CallPhase.ENDED
        button = self.call_button
        text, enabled, ending = {
            Stage.IDLE: ("Start call", mic_problem is None, False),
            Stage.STARTING: ("Cancel", True, True),
            Stage.IN_CALL: ("End call", True, True),
            Stage.ENDING: ("Ending…", False, True),
        }[stage]
        button.setText(text)
        button.setEnabled(enabled)
        keys = shortcuts.native("call")
        button.setToolTip(f"{'Start' if stage is Stage.IDLE else 'End'} the call ({keys})")
        if button.property("ending") != ending:
            button.setProperty("ending", ending)
            button.style().unpolish(button)
            button.style().polish(button)
        self.mute.setEnabled(in_call)
        if stage is Stage.IDLE:
            self.mute.setChecked(False)
        self.pause.setEnabled(in_call)
        self.pause.setText("Resume" if phase is CallPhase.PAUSED and in_call else "Pause")
        self.listen.setEnabled(in_call and phase in (CallPhase.THINKING, CallPhase.SPEAKING))
        self.talk.setVisible(self.chosen_mode is CallMode.PUSH_TO_TALK)
        self.talk.setEnabled(in_call and phase is not CallPhase.PAUSED and not self.mute.isChecked())
        self.reason.setText(mic_problem or "")
        self.reason.setVisible(stage is Stage.IDLE and bool(mic_problem))
