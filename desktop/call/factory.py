"""Starts voice calls for the Call page (part of the composition root): opens the microphone from
Settings, loads the VAD and Whisper once (kept for later calls), builds a Call on the gateway and
the app's Voice, and runs its media thread (the microphone read and every frame's processing).
A call follows the user's choices as a new chat does: the preset chosen for new chats gives its
system prompt, voice and speaking rate, the Settings its sampling (repetition penalty included).
A call that ends is saved as a chat conversation (call/transcript.py) when a store is given."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, Callable

from desktop.call.call import Call, CallEvent
from desktop.call.video import VideoFeed
from desktop.errors import OmnideskError
from desktop.media.clock import Clock, RealClock
from desktop.call.state import CallMode, CallPhase
from desktop.protocol.engine import EngineApi
from desktop.settings import Settings

log = logging.getLogger(__name__)
PUMP_WAIT_S = 0.05  # the media thread waits this long for microphone frames between checks


class CallFactory:
    """`recordings` (desktop.recording.service.Recordings, optional) records each call the settings
    say to; `on_recording(text)` then hears "● Recording", a warning, or "" when it stops.
    `sees_images()`: whether the loaded model takes images (then a video call's frames go to it).
    `store` (a ConversationStore, optional): each call that ends is saved there as a conversation,
    and `on_saved(conversation)` hears of it (on the event loop's thread). `presets` (a
    PresetStore; by default the user's): where the preset of Settings.system_preset is found."""

    def __init__(self, gateway: EngineApi, voice: Callable[[], Any], settings: Callable[[], Settings], *,
                 recordings: Any = None, model: Callable[[], str | None] = lambda: None,
                 sees_images: Callable[[], bool] = lambda: False, store: Any = None, presets: Any = None,
                 clock: Clock = RealClock()) -> None:  # fmt: skip
        self.gateway, self.voice, self.settings, self._presets = gateway, voice, settings, presets
        self.recordings, self.model, self.sees_images = recordings, model, sees_images
        self.store, self.clock = store, clock  # clock: the calls' (tests: a virtual one)
        self.on_recording: Callable[[str], None] = lambda text: None
        self.on_saved: Callable[[Any], None] = lambda conversation: None
        self._asr: Any = None  # Whisper, loaded on the first call
        self._lock = threading.Lock()

    def mic_status(self) -> str | None:
        """None when a microphone is there, else why calls cannot work (shown on the page)."""
        from desktop.media.mic import input_problem

        return input_problem()

    def camera_status(self) -> str | None:
        """None when a camera seems present, else why a video call cannot show one."""
        from desktop.media.camera import camera_problem

        return camera_problem(self.settings().camera_device)

    async def open_camera(self) -> Any:
        """The camera from Settings, opened and delivering (OmnideskError if it cannot)."""
        from desktop.media.camera import Camera, CameraUnavailable

        settings = self.settings()
        camera = Camera(settings.camera_device if settings.camera_device is not None else 0,
                        fps=settings.camera_preview_fps)  # fmt: skip
        try:
            await asyncio.to_thread(camera.start)  # opening can take a second
        except CameraUnavailable as exc:
            raise OmnideskError(str(exc), code="camera") from exc
        return camera

    async def start(self, mode: CallMode) -> Call:
        """A started call (its session open, the microphone running); OmnideskError with a plain
        message when the microphone, the speech models or the model are not available."""
        settings, voice = self.settings(), self.voice()
        preset = self.preset(settings)
        parts = await asyncio.to_thread(self._parts, settings)
        speaker = voice if voice is not None and voice.available else None  # the speaker's owner: taps go to it
        untap = self._echo(parts, speaker)
        video = VideoFeed(rate_hz=settings.camera_frames_per_s, max_in_context=settings.camera_max_frames)
        if speaker is not None:
            speaker.use(*preset.speech())  # the preset's voice and rate (a new one loads now)
            speaker.prepare()
        call = Call(self.gateway, parts.mic, voice, parts.detector, parts.transcriber,
                    canceller=parts.canceller, mode=mode, idle_timeout_s=settings.call_idle_timeout_s, video=video,
                    clock=self.clock, system=preset.prompt or None, params=settings.sampling(),
                    turn_model=parts.turn_model)
        call.listeners.append(lambda event: untap() if event.kind == "ended" else None)
        call.listeners.append(lambda event: self._save(call, preset.id) if event.kind == "ended" else None)
        try:
            await call.start()
        except BaseException:
            parts.mic.close()
            untap()
            raise
        if self.recordings is not None:  # before the media thread: no frame goes unrecorded
            try:  # its folder is made on a thread: a slow disk never holds up the window
                await asyncio.to_thread(self.recordings.record_call, call, speaker,
                                        model=self.model() or "", on_state=self.on_recording)
            except Exception:  # never a reason for the call not to go on
                log.exception("The call could not be recorded")
        threading.Thread(target=self._media, args=(call,), name="call-media", daemon=True).start()
        if parts.notice:  # the smart end of turn could not load: after the page has its listener
            asyncio.get_running_loop().call_soon(call.events.emit, CallEvent("notice", parts.notice))
        return call

    def preset(self, settings: Settings) -> Any:
        """The preset new chats use (Settings.system_preset; the first, "Assistant", when it is gone)."""
        if self._presets is None:
            from desktop.chat.presets import PresetStore

            self._presets = PresetStore()
        return self._presets.get(settings.system_preset) or self._presets.list()[0]

    def _save(self, call: Call, preset: str = "") -> None:
        """The ended call's exchange as a conversation in Chat (a failure is logged: the call
        itself went well)."""
        if self.store is None:
            return
        from desktop.call.transcript import save_call

        try:
            conv = save_call(self.store, list(call.turns), call.system or "", preset)
        except Exception:
            log.exception("The call could not be saved as a conversation")
            return
        if conv is not None:
            self.on_saved(conv)

    def _parts(self, settings: Settings) -> Any:
        from desktop.call.parts import make_call_parts
        from desktop.media.asr import ASRUnavailable, WhisperASR

        device = settings.device if settings.device.startswith("cuda") else "cpu"  # ASR beside the model
        with self._lock:
            if self._asr is None:
                try:
                    self._asr = WhisperASR(device=device, threads=1)
                except ASRUnavailable as exc:
                    if device == "cpu":
                        raise
                    log.warning("Whisper on %s failed (%s); transcribing on the CPU", device, exc)
                    self._asr = WhisperASR(device="cpu", threads=1)
        return make_call_parts(settings.audio_input_device, asr=self._asr, end_of_turn=settings.end_of_turn)

    @staticmethod
    def _echo(parts: Any, speaker: Any) -> Callable[[], None]:
        """Cancel the speaker's echo in the microphone: what the speaker plays (tapped from the
        Voice) is the far end. Returns how to detach the tap when the call ends."""
        if speaker is None:  # no speaker (audio off): nothing can echo
            return lambda: None
        from desktop.media.echo import EchoCanceller
        from desktop.media.far_end import FarEndReference

        far = FarEndReference.tap(speaker)
        parts.canceller = EchoCanceller(far)
        return far.release  # untaps, and lets its resampler go

    @staticmethod
    def _media(call: Call) -> None:
        while call.phase is not CallPhase.ENDED:
            try:
                call.pump(timeout=PUMP_WAIT_S)
            except Exception:  # a broken frame must not end the call silently: log, go on
                log.exception("call media step failed")
