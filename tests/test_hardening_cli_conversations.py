"""Issue 19, item 12 (part) and new-user item 8 (the terminal part): the terminal chat saves its
conversations in the window's store after every turn, `--resume` continues one (the newest, or by
id or title prefix), `--list` and /list list them; Ctrl+C at the prompt warns, a second one leaves
with nothing lost; Ctrl+C during a reply stops it and the stopped reply is kept."""

from __future__ import annotations

import builtins

import pytest

from desktop import cli
from desktop.cli_conversation import find
from desktop.chat.conversations import ConversationStore, StoredMessage
from desktop.protocol import ChunkEvent
from desktop.workers.local import LocalClient

pytestmark = pytest.mark.hardening
CTRL_C = object()
ARGS = ["chat", "--model", "tiny", "--max-tokens", "4", "--threads", "1"]


@pytest.fixture(autouse=True)
def own_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("OMNIDESK_DATA_DIR", str(tmp_path / "data"))


def typed(monkeypatch, items: list) -> None:
    """What the user types at the prompt: lines, CTRL_C for a Ctrl+C there; then Ctrl-D."""
    left = iter(items)

    def fake_input(prompt: str = "") -> str:
        item = next(left, EOFError)
        if item is EOFError:
            raise EOFError
        if item is CTRL_C:
            raise KeyboardInterrupt
        return item
    monkeypatch.setattr(builtins, "input", fake_input)


def sent_messages(monkeypatch) -> list:
    """The messages of every chat the terminal sends to the model."""
    sent = []
    real = LocalClient.stream
    monkeypatch.setattr(LocalClient, "stream", lambda self, cmd, rid=None: (
        sent.append([(m.role, m.content) for m in cmd.messages]) if cmd is not None else None, real(self, cmd, rid))[1])
    return sent


def saved() -> list:
    return ConversationStore.default().list()


def test_every_turn_is_saved_and_resume_continues_the_newest(monkeypatch, capsys):
    typed(monkeypatch, ["Hello there", "/quit"])
    assert cli.main(ARGS) == 0
    convs = saved()
    assert len(convs) == 1, "the terminal chat's conversation was not saved"
    first = convs[0]
    assert [m.role for m in first.messages] == ["user", "assistant"] and first.title == "Hello there"
    assert first.messages[1].content and first.messages[1].stats["generated_tokens"] > 0
    assert "--resume" in capsys.readouterr().err  # says how to come back

    sent = sent_messages(monkeypatch)
    typed(monkeypatch, ["And then?", "/quit"])
    assert cli.main(ARGS + ["--resume"]) == 0
    err = capsys.readouterr().err
    assert "Resumed “Hello there”: 2 messages." in err
    convs = saved()
    assert len(convs) == 1 and convs[0].id == first.id
    assert [m.role for m in convs[0].messages] == ["user", "assistant", "user", "assistant"]
    assert [c for _, c in sent[0] if _ != "system"][:3] == ["Hello there", first.messages[1].content, "And then?"]


def test_regen_keeps_the_earlier_reply_as_a_version_as_the_window_does(monkeypatch, capsys):
    typed(monkeypatch, ["Hello", "/regen", "/regen", "/quit"])
    assert cli.main(ARGS) == 0
    (conv,) = saved()
    assert [m.role for m in conv.messages] == ["user", "assistant"]
    reply = conv.messages[1]
    assert len(reply.versions) == 2 and reply.shown == 2 and all(v.content for v in reply.versions)


def test_resume_by_id_or_title_and_the_lists(monkeypatch, capsys):
    store = ConversationStore.default()
    older = store.new("Be brief.")
    older.messages = [StoredMessage(role="user", content="Tell me about foxes"),
                      StoredMessage(role="assistant", content="Foxes are quick.")]
    store.save(older)
    newer = store.new()
    newer.messages = [StoredMessage(role="user", content="Plan a trip to Lyon")]
    store.save(newer)

    assert find(store, "") is newer and find(store, "tell ME") is older and find(store, older.id[:6]) is older
    assert find(store, older.id) is older and find(store, "nothing like it") is None

    assert cli.main(["--list"]) == 0  # no model loaded, no window opened
    out = capsys.readouterr().out
    assert out.index("Plan a trip to Lyon") < out.index("Tell me about foxes")
    assert older.id[:8] in out and newer.id[:8] in out and "2 messages" in out

    sent = sent_messages(monkeypatch)
    typed(monkeypatch, ["/list", "And wolves?", "/quit"])
    assert cli.main(ARGS + ["--resume", "Tell me"]) == 0
    out = capsys.readouterr().out
    assert "Plan a trip to Lyon" in out  # /list
    assert sent[0] == [("system", "Be brief."), ("user", "Tell me about foxes"),
                       ("assistant", "Foxes are quick."), ("user", "And wolves?")]
    assert len(store_again := ConversationStore.default().get(older.id).messages) == 4, store_again

    typed(monkeypatch, [])
    assert cli.main(ARGS + ["--resume", "zebras"]) == 2
    assert "no saved conversation" in capsys.readouterr().err and len(sent) == 1


def test_ctrl_c_at_the_prompt_warns_and_a_second_one_leaves_with_nothing_lost(monkeypatch, capsys):
    typed(monkeypatch, ["Hello", CTRL_C, "/stats", CTRL_C, CTRL_C, "never read"])
    assert cli.main(ARGS) == 0
    captured = capsys.readouterr()
    assert "Requests: 1" in captured.out  # the chat went on after the first Ctrl+C
    assert captured.err.count("Press Ctrl+C again") == 2  # each lone Ctrl+C warns
    assert "Saved as “Hello”" in captured.err
    (conv,) = saved()
    assert [m.role for m in conv.messages] == ["user", "assistant"]


def test_ctrl_c_during_a_reply_stops_it_and_keeps_what_was_written(monkeypatch, capsys):
    real = LocalClient.stream
    first = []

    def interrupted(self, cmd, rid=None):
        stream = real(self, cmd, rid)
        if cmd is None or first:
            return stream
        first.append(cmd.request_id)

        def until_first_words():
            for event in stream:
                yield event
                if isinstance(event, ChunkEvent):
                    raise KeyboardInterrupt  # as the user's Ctrl+C lands mid-reply
        return until_first_words()

    monkeypatch.setattr(LocalClient, "stream", interrupted)
    typed(monkeypatch, ["Tell me a long story", "Go on"])
    assert cli.main(["chat", "--model", "tiny", "--max-tokens", "24", "--threads", "1"]) == 0
    err = capsys.readouterr().err
    assert err.count("stopped") == 1, err
    (conv,) = saved()
    assert [m.role for m in conv.messages] == ["user", "assistant", "user", "assistant"]
    assert conv.messages[1].content and conv.messages[1].stats["finish_reason"] in ("stopped", "cancelled")


def test_a_resumed_conversation_with_images_sends_them_to_a_model_that_sees(tmp_path):
    """A conversation from the window with a stored image: the terminal chat reads the image from
    the store (request parts carry no file paths, which the model's door refuses)."""
    import io

    from PIL import Image

    from desktop.cli_conversation import TerminalConversation
    from desktop.model.images import ImageData
    from desktop.model.messages import parse_messages

    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 30, 30)).save(buf, format="PNG")
    store = ConversationStore(tmp_path / "conversations")
    stored = store.images.add(ImageData.from_bytes(buf.getvalue()))
    chat = TerminalConversation.start(store, "")
    chat.conv.messages.append(StoredMessage(role="user", content="What is this?", images=[str(stored)]))
    msgs = parse_messages(chat.request(images=True))
    assert len(msgs[-1].images) == 1 and (msgs[-1].images[0].width, msgs[-1].images[0].height) == (8, 8)
