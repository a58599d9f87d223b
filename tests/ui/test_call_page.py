"""The Call page on a fake call (offscreen): start and end, the phase indicator, level meter,
live transcript (partials → final, streamed reply, barge-in mark), per-turn metrics, the buttons
and push-to-talk keys, errors in the page, no microphone; and the main window taking the page."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading

import pytest
from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from desktop.call.call import CallEvent, TurnMetrics
from desktop.call.state import CallMode, CallPhase, TurnEnd
from desktop.errors import OmnideskError
from desktop.settings import Settings
from desktop.ui.call import CallPage
from desktop.ui.call.controls import Stage
from desktop.ui.call.level import level_percent
from desktop.ui.main_window import MainWindow

NO_MIC = "No microphone found. Connect one, or choose it in Settings → Audio."


class FakeCall:
    """The methods the page uses of call.call.Call, recorded; `emit` plays the call's events."""

    def __init__(self, mode: CallMode) -> None:
        self.mode = mode
        self.phase = CallPhase.LISTENING
        self.listeners: list = []
        self.log: list[tuple] = []

    def set_mode(self, mode: CallMode) -> None:
        self.log.append(("set_mode", mode))

    def set_muted(self, on: bool) -> None:
        self.log.append(("set_muted", on))

    def pause(self) -> None:
        self.log.append(("pause",))

    def resume(self) -> None:
        self.log.append(("resume",))

    def force_listen(self) -> None:
        self.log.append(("force_listen",))

    def key_down(self) -> None:
        self.log.append(("key_down",))

    def key_up(self) -> None:
        self.log.append(("key_up",))

    async def end(self) -> None:
        self.log.append(("end",))
        await asyncio.sleep(0.01)
        self.emit(CallEvent("phase", phase=CallPhase.ENDED))
        self.emit(CallEvent("ended", "user"))

    def emit(self, *events: CallEvent) -> None:
        for event in events:
            for listener in list(self.listeners):
                listener(event)

    def emit_from_thread(self, *events: CallEvent) -> None:
        """As the real call does: from a media/voice thread, never the Qt thread."""
        t = threading.Thread(target=self.emit, args=events)
        t.start()
        t.join()

    def names(self) -> list[str]:
        return [entry[0] for entry in self.log]


class Owner:
    """What composition passes: start_call and mic_status."""

    def __init__(self, mic: str | None = None, fail: str | None = None) -> None:
        self.mic, self.fail = mic, fail
        self.calls: list[FakeCall] = []
        self.modes: list[CallMode] = []

    async def start_call(self, mode: CallMode) -> FakeCall:
        self.modes.append(mode)
        await asyncio.sleep(0.01)
        if self.fail:
            raise OmnideskError(self.fail)
        call = FakeCall(mode)
        self.calls.append(call)
        return call

    def mic_status(self) -> str | None:
        return self.mic


@pytest.fixture
def make_page(qtbot):
    def make(owner: Owner) -> CallPage:
        page = CallPage(owner.start_call, owner.mic_status)
        qtbot.addWidget(page)
        page.resize(1000, 680)
        page.show()
        qtbot.waitExposed(page)
        return page

    return make


def settle(aloop, page: CallPage | None = None) -> None:
    """Let the page's tasks finish and queued events (from other threads) arrive."""
    async def run() -> None:
        if page is not None:
            await page.tasks.wait()
        await asyncio.sleep(0.02)

    aloop.run(run())


def started(aloop, page: CallPage, owner: Owner) -> FakeCall:
    page.controls.call_button.click()
    assert page.stage is Stage.STARTING and page.controls.call_button.text() == "Cancel"
    settle(aloop, page)
    assert page.stage is Stage.IN_CALL
    return owner.calls[-1]


def metrics(turn: int, **fields) -> TurnMetrics:
    return TurnMetrics(turn, **fields)


def test_level_percent_maps_minus_60_to_0_db():
    assert [level_percent(db) for db in (-90.0, -60.0, -30.0, -6.0, 0.0, 3.0)] == [0, 0, 50, 90, 100, 100]
    assert level_percent(float("nan")) == 0


def test_idle_page_offers_start(make_page, screenshot):
    page = make_page(Owner())
    c = page.controls
    assert page.indicator.text == "Not in a call"
    assert c.call_button.isEnabled() and c.call_button.text() == "Start call"
    assert not c.mute.isEnabled() and not c.pause.isEnabled() and not c.listen.isEnabled()
    assert not c.reason.isVisible() and not c.talk.isVisible()
    assert [c.mode.itemText(i) for i in range(c.mode.count())] == ["Full duplex", "Turn-taking", "Push-to-talk"]
    assert page.transcript.placeholderText().startswith("Start a call")
    screenshot(page, "call_idle")


def test_no_microphone_disables_start_with_the_reason(make_page, aloop, screenshot):
    owner = Owner(mic=NO_MIC)
    page = make_page(owner)
    c = page.controls
    assert not c.call_button.isEnabled()
    assert c.reason.isVisible() and c.reason.text() == NO_MIC
    assert page.transcript.placeholderText().startswith("Calls need a microphone") and not page.meter.isVisible()
    page.toggle_call()  # Ctrl+Enter starts nothing, and says why
    settle(aloop, page)
    assert owner.modes == [] and page.stage is Stage.IDLE
    assert page.notice.text == "Cannot start a call: No microphone found. Connect one, or choose it in Settings → Audio."
    screenshot(page, "call_no_microphone")
    owner.mic = None  # plugged in
    page.refresh_mic()
    assert c.call_button.isEnabled() and not c.reason.isVisible() and page.meter.isVisible()
    assert page.notice.text == "" and page.transcript.placeholderText().startswith("Start a call")


def test_at_the_windows_minimum_size_the_hint_wraps_and_the_metrics_fit(make_page, qtbot, screenshot):
    """The page as a 953x470 window shows it (less sidebar, menu and status bar): the no-microphone
    hint wraps and is whole in sight; the turn-metrics columns fit without a sideways scroll bar,
    each wide enough for its header and cells."""
    page = make_page(Owner(mic=NO_MIC))
    page.resize(953 - 172, 470 - 45)
    page.metrics.add(metrics(12, speech_end_t=10.0, first_audio_t=11.234, asr_ms=1640.0, ttft_ms=195.0,
                             cached_tokens=12_345, new_tokens=41, kv_tokens=12_386, first_token_t=10.5,
                             underruns=3, drift_ms=120.0, heard="The capital", turn_end=TurnEnd(12.5, "fallback")))
    qtbot.wait(50)
    hint, view = page.transcript.hint, page.transcript.viewport()
    line = hint.fontMetrics().height()
    assert hint.isVisible() and hint.text().startswith("Calls need a microphone") and hint.text().endswith("(Ctrl+,).")
    assert hint.wordWrap() and hint.height() >= hint.heightForWidth(hint.width()) >= 2 * line  # wrapped, all of it
    assert hint.geometry().right() < view.width() and hint.geometry().bottom() < view.height()
    table = page.table
    assert not table.horizontalScrollBar().isVisible()
    header = table.horizontalHeader()
    assert sum(header.sectionSize(c) for c in range(header.count())) <= table.viewport().width()
    assert all(header.sectionSize(c) >= w for c, w in enumerate(table.natural_widths()))
    screenshot(page, "call_min_size")
    page.transcript.log.user("Hello")
    page.transcript.refresh()
    assert not hint.isVisible()  # the transcript's own text replaces it
    page.resize(1600, 1000)
    qtbot.wait(50)
    widths = [header.sectionSize(c) for c in range(header.count())]
    assert sum(widths) >= table.viewport().width() - 1 and max(widths) - min(widths) < 200  # the room shared out
    screenshot(page, "call_large")


def test_a_call_with_turns_and_a_barge_in(make_page, aloop, screenshot):
    owner = Owner()
    page = make_page(owner)
    call = started(aloop, page, owner)
    assert owner.modes == [CallMode.DUPLEX]
    assert page.indicator.text == "Listening" and page.controls.call_button.text() == "End call"
    assert len(call.listeners) == 1
    ev = CallEvent
    log = page.transcript.log

    # turn 1, the events from another thread as the real call sends them
    call.emit_from_thread(ev("level", value=-30.0), ev("phase", phase=CallPhase.USER_SPEAKING),
                          ev("partial", "What is"), ev("partial", "What is the capital"))
    settle(aloop)
    assert page.indicator.text == "You're speaking"
    assert page.meter.value == 50
    assert [(e.role, e.text, e.partial) for e in log.entries] == [("user", "What is the capital", True)]
    assert "<i>What is the capital…</i>" in page.transcript.toHtml() or "What is the capital…" in page.transcript.toPlainText()
    call.emit_from_thread(ev("phase", phase=CallPhase.TRANSCRIBING), ev("user", "What is the capital of France?"),
                          ev("phase", phase=CallPhase.THINKING))
    settle(aloop)
    assert page.indicator.text == "Thinking…" and page.controls.listen.isEnabled()
    assert [(e.role, e.text, e.partial) for e in log.entries] == [("user", "What is the capital of France?", False)]
    call.emit_from_thread(ev("assistant", "The capital"), ev("phase", phase=CallPhase.SPEAKING),
                          ev("assistant", " of France is Paris."),
                          ev("metrics", metrics=metrics(1, user_text="What is the capital of France?",
                                                        speech_end_t=10.0, first_audio_t=10.812, asr_ms=640.0,
                                                        ttft_ms=95.0, cached_tokens=0, new_tokens=41,
                                                        kv_tokens=52, first_token_t=10.5, underruns=0,
                                                        drift_ms=12.0, turn_end=TurnEnd(10.43, "smart"),
                                                        draft_tokens=30)),
                          ev("phase", phase=CallPhase.LISTENING))
    settle(aloop)
    assert log.entries[-1].role == "assistant" and log.entries[-1].text == "The capital of France is Paris."
    assert page.metrics.rowCount() == 1
    assert [page.metrics.text(0, c) for c in range(9)] == ["1", "812 ms", "430 ms", "640 ms", "95 ms", "312 ms",
                                                           "0", "0", "41"]

    # turn 2: the user talks over the reply
    call.emit_from_thread(ev("phase", phase=CallPhase.USER_SPEAKING), ev("partial", "And"),
                          ev("phase", phase=CallPhase.TRANSCRIBING), ev("user", "And Germany?"),
                          ev("phase", phase=CallPhase.THINKING),
                          ev("assistant", "Berlin is the capital of Germany. It is also its largest city,"),
                          ev("phase", phase=CallPhase.SPEAKING),
                          ev("assistant", " with about 3.7 million people."),
                          ev("metrics", metrics=metrics(2, speech_end_t=20.0, first_audio_t=20.7, asr_ms=610.0,
                                                        ttft_ms=40.0, cached_tokens=52, new_tokens=9,
                                                        kv_tokens=88)),
                          ev("phase", phase=CallPhase.USER_SPEAKING), ev("partial", "Wait,"),
                          ev("cut", "Berlin is the capital of Germany. It is"),
                          ev("metrics", metrics=metrics(2, speech_end_t=20.0, first_audio_t=20.7, asr_ms=610.0,
                                                        ttft_ms=40.0, cached_tokens=52, new_tokens=9,
                                                        kv_tokens=70, heard="Berlin is the capital of Germany. It is")))
    settle(aloop)
    cut = log.entries[3]
    assert (cut.role, cut.heard) == ("assistant", "Berlin is the capital of Germany. It is")
    assert (log.entries[4].role, log.entries[4].text, log.entries[4].partial) == ("user", "Wait,", True)
    text = page.transcript.toPlainText()
    assert "Berlin is the capital of Germany. It is also its largest city, with about 3.7 million people. — interrupted" in text
    html = page.transcript.toHtml()
    assert "line-through" in html and "also its largest city" in html.split("line-through")[1]
    assert "Berlin is the capital" not in html.split("line-through")[1]
    assert page.metrics.rowCount() == 2 and page.metrics.text(1, 0) == "2 · cut" and page.metrics.text(1, 7) == "52"
    call.emit_from_thread(ev("partial", "Wait, what about Italy"), ev("phase", phase=CallPhase.TRANSCRIBING),
                          ev("user", "Wait, what about Italy?"), ev("phase", phase=CallPhase.THINKING),
                          ev("assistant", "Rome."), ev("phase", phase=CallPhase.SPEAKING),
                          ev("metrics", metrics=metrics(3, speech_end_t=30.0, first_audio_t=30.65, asr_ms=600.0,
                                                        ttft_ms=38.0, cached_tokens=70, new_tokens=12,
                                                        kv_tokens=86, turn_end=TurnEnd(32.5, "fallback"))),
                          ev("level", value=-18.0))
    settle(aloop)
    assert [e.text for e in log.entries if e.role == "assistant"][-1] == "Rome."
    assert page.metrics.rowCount() == 3 and page.metrics.text(2, 2) == "2,500 ms*"
    screenshot(page, "call_in_call")


def test_buttons_call_the_call(make_page, aloop):
    owner = Owner()
    page = make_page(owner)
    c = page.controls
    call = started(aloop, page, owner)
    assert not c.listen.isEnabled()
    c.mute.click()
    assert call.log[-1] == ("set_muted", True) and page.meter.muted
    c.mute.click()
    assert call.log[-1] == ("set_muted", False)
    c.pause.click()
    assert call.log[-1] == ("pause",)
    call.emit(CallEvent("phase", phase=CallPhase.PAUSED))
    settle(aloop)
    assert c.pause.text() == "Resume" and page.indicator.text == "Paused"
    c.pause.click()
    assert call.log[-1] == ("resume",)
    for phase in (CallPhase.THINKING, CallPhase.SPEAKING):
        call.emit(CallEvent("phase", phase=phase))
        settle(aloop)
        assert c.listen.isEnabled()
        c.listen.click()
        assert call.log[-1] == ("force_listen",)
    call.emit(CallEvent("phase", phase=CallPhase.LISTENING))
    settle(aloop)
    assert c.pause.text() == "Pause" and not c.listen.isEnabled()
    c.select_mode(CallMode.TURNS)
    assert call.log[-1] == ("set_mode", CallMode.TURNS)
    c.select_mode(CallMode.PUSH_TO_TALK)
    assert call.log[-1] == ("set_mode", CallMode.PUSH_TO_TALK) and c.talk.isVisible()
    assert call.names().count("set_mode") == 2


def _key(widget, kind: QEvent.Type, repeat: bool = False) -> None:
    QApplication.sendEvent(widget, QKeyEvent(kind, Qt.Key.Key_Space, Qt.KeyboardModifier.NoModifier, " ", repeat))


def test_push_to_talk_space_held_calls_key_down_and_up_once(make_page, aloop, screenshot):
    owner = Owner()
    page = make_page(owner)
    page.set_mode(CallMode.PUSH_TO_TALK)
    call = started(aloop, page, owner)
    assert owner.modes == [CallMode.PUSH_TO_TALK]
    assert "Hold Space" in page.transcript.placeholderText()
    _key(page, QEvent.Type.KeyPress)
    for _ in range(5):  # held: the platform repeats the key
        _key(page, QEvent.Type.KeyRelease, repeat=True)
        _key(page, QEvent.Type.KeyPress, repeat=True)
    _key(page, QEvent.Type.KeyRelease)
    assert call.names() == ["key_down", "key_up"]
    # with a button focused Space still talks, and does not click the button
    mute = page.controls.mute
    _key(mute, QEvent.Type.KeyPress)
    _key(mute, QEvent.Type.KeyRelease)
    assert call.names() == ["key_down", "key_up"] * 2 and not mute.isChecked()
    # Hold to talk, with the mouse
    talk = page.controls.talk
    assert talk.isVisible() and talk.isEnabled()
    screenshot(page, "call_push_to_talk")
    QTest.mousePress(talk, Qt.MouseButton.LeftButton)
    QTest.mouseRelease(talk, Qt.MouseButton.LeftButton)
    assert call.names()[-2:] == ["key_down", "key_up"]
    # released by leaving the page while held
    _key(page, QEvent.Type.KeyPress)
    page.hide()
    assert call.names()[-2:] == ["key_down", "key_up"]
    # in duplex mode Space is just a key
    page.show()
    page.set_mode(CallMode.DUPLEX)
    n = len(call.log)
    _key(page, QEvent.Type.KeyPress)
    _key(page, QEvent.Type.KeyRelease)
    assert "key_down" not in call.names()[n:]


def test_end_returns_to_idle_and_ctrl_enter_toggles(make_page, aloop, qtbot):
    owner = Owner()
    page = make_page(owner)
    page.activateWindow()
    assert QTest.qWaitForWindowActive(page)
    page.setFocus()
    QTest.keyClick(page, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    settle(aloop, page)
    assert page.stage is Stage.IN_CALL
    call = owner.calls[0]
    call.emit(CallEvent("assistant", "Hello"))
    page.controls.call_button.click()
    assert page.controls.call_button.text() == "Ending…" and not page.controls.call_button.isEnabled()
    settle(aloop, page)
    assert call.names()[-1] == "end" and call.listeners == []
    assert page.stage is Stage.IDLE and page.call is None
    assert page.indicator.text == "Call ended" and page.controls.call_button.text() == "Start call"
    assert not page.controls.mute.isEnabled() and page.meter.value == 0
    assert page.transcript.log.entries  # the last call's words stay readable
    page.controls.mute.setFocus()
    QTest.keyClick(page.controls.mute, Qt.Key.Key_Enter, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.KeypadModifier)
    settle(aloop, page)
    assert page.stage is Stage.IN_CALL and len(owner.calls) == 2
    assert page.transcript.log.entries == [] and page.metrics.rowCount() == 0  # a new call starts clean


def test_errors_are_shown_in_the_page(make_page, aloop):
    owner = Owner(fail="The model is still loading. Try again in a moment.")
    page = make_page(owner)
    page.controls.call_button.click()
    settle(aloop, page)
    assert page.stage is Stage.IDLE and page.notice.error
    assert page.notice.text == "The model is still loading. Try again in a moment."
    owner.fail = None
    call = started(aloop, page, owner)
    assert page.notice.text == ""  # cleared by the new call
    call.emit_from_thread(CallEvent("error", "The model stopped unexpectedly while answering."))
    settle(aloop)
    assert page.notice.isVisible() and page.notice.error
    assert "stopped unexpectedly" in page.notice.text
    assert page.stage is Stage.IN_CALL  # an error in a turn does not end the call


def test_idle_timeout_ends_the_call_with_the_reason(make_page, aloop):
    owner = Owner()
    page = make_page(owner)
    call = started(aloop, page, owner)
    call.emit(CallEvent("phase", phase=CallPhase.USER_SPEAKING), CallEvent("partial", "uh"))
    call.emit_from_thread(CallEvent("phase", phase=CallPhase.ENDED), CallEvent("ended", "idle"))
    settle(aloop)
    assert page.stage is Stage.IDLE and page.call is None and call.listeners == []
    assert not page.notice.error and "nobody spoke" in page.notice.text
    assert page.transcript.log.entries == []  # the partial with no final went
    assert page.controls.call_button.isEnabled() and page.controls.call_button.text() == "Start call"
    assert "end" not in call.names()  # it ended itself


def test_cancel_while_starting_hangs_up_the_new_call(make_page, aloop):
    owner = Owner()
    page = make_page(owner)
    page.controls.call_button.click()
    page.controls.call_button.click()  # "Cancel"
    assert page.stage is Stage.ENDING
    settle(aloop, page)
    assert owner.calls[0].names() == ["end"] and page.stage is Stage.IDLE and page.call is None


def test_shutdown_hangs_up(make_page, aloop):
    owner = Owner()
    page = make_page(owner)
    call = started(aloop, page, owner)
    aloop.run(page.shutdown())
    assert call.names() == ["end"] and page.stage is Stage.IDLE


def test_main_window_takes_the_call_page(qtbot, aloop):
    owner = Owner()
    page = CallPage(owner.start_call, owner.mic_status)
    window = MainWindow(Settings(), lambda: None, call_page=page)
    qtbot.addWidget(window)
    window.show_page("call")
    assert window.pages["call"] is page and window.stack.currentWidget() is page
    page.status.emit("Call started")
    assert window.status.toolTip() == "Call started"  # say() sets the full text as the tooltip
    other = CallPage(owner.start_call, owner.mic_status)
    window.set_call_page(other)
    assert window.pages["call"] is other and window.stack.currentWidget() is other
    assert window.stack.count() == len(window.pages) == 5 and window.current_page == "call"  # chat, call, recordings, admin, models: the old call page is gone


def test_the_recording_sign_and_a_recording_warning(make_page, aloop, screenshot):
    owner = Owner()
    page = make_page(owner)
    call = started(aloop, page, owner)
    assert not page.rec_label.isVisible()
    threading.Thread(target=page.recording.emit, args=("● Recording",)).start()  # as the recorder does
    settle(aloop)
    assert page.rec_label.isVisible() and page.rec_label.text() == "● Recording"
    screenshot(page, "call_recording")
    warning = "Recording stopped: the disk is full. The call goes on; what was recorded so far is kept."
    page.recording.emit(warning)
    settle(aloop)
    assert not page.rec_label.isVisible() and page.notice.error and page.notice.text == warning
    assert page.stage is Stage.IN_CALL  # the call goes on
    screenshot(page, "call_recording_stopped")
    page.recording.emit("● Recording")
    settle(aloop)
    page.controls.call_button.click()
    call.emit(CallEvent("phase", phase=CallPhase.ENDED))
    settle(aloop, page)
    assert page.stage is Stage.IDLE and not page.rec_label.isVisible()


def test_a_notice_is_shown_without_ending_the_call(make_page, aloop, screenshot):
    """Issue 21: the smart end of turn could not load; the call goes on with the silence rule and
    the page says so, as information (not an error)."""
    owner = Owner()
    page = make_page(owner)
    call = started(aloop, page, owner)
    text = ("The end-of-turn model is not installed (pip install --no-deps pipecat-ai). "
            "Turns end after half a second of silence instead.")
    call.emit_from_thread(CallEvent("notice", text))
    settle(aloop)
    assert page.notice.isVisible() and not page.notice.error and page.notice.text == text
    assert page.stage is Stage.IN_CALL
    path = screenshot(page, "call_notice")
    if os.environ.get("OMNIDESK_SHOTS"):
        shutil.copy(path, os.path.join(os.environ["OMNIDESK_SHOTS"], "smart-call-notice.png"))
