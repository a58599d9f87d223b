"""The Calls page of the settings dialog: how a call starts (its mode), how the end of the user's
turn is heard, when a silent call ends, and the camera of a video call (which one, its preview rate, and the frames the model is given)."""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox

from desktop.call.state import CallMode
from desktop.media.camera import camera_nodes
from desktop.settings import Settings
from desktop.ui.settings_form import Page, field_width, float_spin, int_spin

MODES = {CallMode.DUPLEX: "Full duplex — talk any time", CallMode.TURNS: "Turn-taking",
         CallMode.PUSH_TO_TALK: "Push-to-talk — hold Space"}
END_OF_TURN = {"smart": "Smart — a model hears when you have finished",
               "silence": "Silence only — after half a second"}
FIRST_CAMERA = "First camera found"


class CallsPage(Page):
    """Calls and the camera. `cameras`: the camera devices to offer (default: /dev/video*); any
    other index, device path or video file can be typed in."""

    def __init__(self, s: Settings, cameras: list[str] | None = None) -> None:
        super().__init__("Calls")
        self.mode = QComboBox()
        for mode, text in MODES.items():
            self.mode.addItem(text, mode.value)
        self.mode.setCurrentIndex(max(self.mode.findData(s.call_mode), 0))
        self.add("Start calls &in:", "call_mode", self.mode, "The Call page's mode can be changed during a call too.")
        self.end_of_turn = QComboBox()
        for value, text in END_OF_TURN.items():
            self.end_of_turn.addItem(text, value)
        self.end_of_turn.setCurrentIndex(max(self.end_of_turn.findData(s.end_of_turn), 0))
        self.add("&End of turn:", "end_of_turn", self.end_of_turn,
                 "Smart: at each short pause a small model hears whether you have finished, so you can pause "
                 "mid-sentence. Silence only: half a second of silence ends your turn. From the next call on.")
        self.idle = float_spin("call_idle_timeout_s", 1, 1.0, " min")
        lo, hi = self.idle.minimum(), self.idle.maximum()
        self.idle.setRange(round(lo / 60, 1) or 0.2, hi / 60)
        self._idle_s = s.call_idle_timeout_s  # given back exactly while the field shows it
        self.idle.setValue(s.call_idle_timeout_s / 60)
        self.add("End a silent call &after:", "call_idle_timeout_s", self.idle,
                 "A call in which nobody speaks for this long hangs up by itself.")

        self.camera = QComboBox()
        self.camera.setEditable(True)
        self.camera.setMinimumWidth(field_width(self.camera) * 2)
        self.camera.addItem(FIRST_CAMERA, None)
        for node in cameras if cameras is not None else camera_nodes():
            self.camera.addItem(node, node)
        current = s.camera_device
        if current is not None and self.camera.findData(current) < 0:
            self.camera.addItem(current, current)
        self.camera.setCurrentIndex(0 if current is None else self.camera.findData(current))
        self.add("&Camera:", "camera_device", self.camera,
                 "For video calls: a camera number (0 is the first), a device such as /dev/video0, or a video file.")
        self.preview = int_spin("camera_preview_fps", " fps")
        self.preview.setValue(s.camera_preview_fps)
        self.add("&Preview rate:", "camera_preview_fps", self.preview,
                 "How often the camera's picture is read and shown.")
        self.rate = float_spin("camera_frames_per_s", 1, 0.5, " per second")
        self.rate.setValue(s.camera_frames_per_s)
        self.add("&Frames to the model:", "camera_frames_per_s", self.rate,
                 "Pictures of the camera given with what you say (only to a model that sees images).")
        self.max_frames = int_spin("camera_max_frames", " frames")
        self.max_frames.setValue(s.camera_max_frames)
        self.add("At &most:", "camera_max_frames", self.max_frames,
                 "In all, per call; after that the model gets no new pictures (the preview goes on).")

    def camera_value(self) -> str | None:
        """The chosen or typed camera; None for the first one found."""
        text = self.camera.currentText().strip()
        index = self.camera.findText(text)
        if index >= 0:
            return self.camera.itemData(index)
        return text or None

    def values(self) -> dict[str, object]:
        minutes = self.idle.value()
        idle = self._idle_s if minutes == round(self._idle_s / 60, self.idle.decimals()) else minutes * 60
        return {"call_mode": self.mode.currentData(), "end_of_turn": self.end_of_turn.currentData(),
                "call_idle_timeout_s": idle,
                "camera_device": self.camera_value(), "camera_preview_fps": self.preview.value(),
                "camera_frames_per_s": self.rate.value(), "camera_max_frames": self.max_frames.value()}
