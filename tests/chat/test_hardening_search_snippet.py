"""Issue 19, new-user item 5 (the engine's part): a search's snippet cut the first word ("…llo
world"); it now cuts only between words and shows a short text whole. The message a search leads
to is the one its snippet shows."""

from __future__ import annotations

import pytest

from desktop.chat.conversations import Conversation, StoredMessage
from desktop.chat.search import SNIPPET_CHARS, Hit, SearchIndex, snippet

pytestmark = pytest.mark.hardening

TEXTS = [
    "Hello world, how are you, banana lovers of the world? This line goes on for a good while longer",
    "Hello world, how are you doing today? I wanted to ask you about the weather forecast for the weekend",
    "Supercalifragilisticexpialidocious is a long word and the weather is nice today in the city of London",
    "line one\nline two has the word banana in it and then it goes on and on and on for a long time",
    "Ab cd ef gh ij kl mn op qr st uv wx yz the match is here: banana and more text that goes on and on",
]


def words_of(text: str) -> set[str]:
    return set(" ".join(text.split()).split(" "))


@pytest.mark.parametrize("text", TEXTS)
def test_a_snippet_never_starts_or_ends_inside_a_word(text):
    word = "weather" if "weather" in text else "banana"
    piece = snippet(text, word)
    assert word in piece.lower() and len(piece.strip("…")) <= SNIPPET_CHARS
    inner = piece.strip("…").split(" ")
    assert set(inner) <= words_of(text), f"{piece!r} cuts a word"


def test_a_short_text_shows_whole_and_an_early_match_from_the_start():
    assert snippet("Hi there,\nmy banana", "banana") == "Hi there, my banana"
    text = "Hello world, how are you, banana lovers of the world? This line goes on for a good while longer"
    assert snippet(text, "banana").startswith("Hello world")  # it was "…llo world"


def test_the_search_leads_to_the_message_its_snippet_shows():
    conv = Conversation(id="a" * 32, title="Trips")
    conv.messages = [StoredMessage("user", "Is Lisbon warm in May?"),
                     StoredMessage("assistant", "Lisbon is mild in May; pack a jacket."),
                     StoredMessage("user", "And Porto in May?"),
                     StoredMessage("assistant", "Porto is cooler and rainier.")]
    (hit,) = SearchIndex().search([conv], "may lisbon")
    assert hit.message_index() == 1  # the latest message with both words
    assert "Lisbon is mild in May" in hit.snippet()
    assert Hit(conv, "porto", ("porto",)).message_index() == 3  # the latest mention
