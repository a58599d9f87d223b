"""The words that leave a turn open (desktop/call/turn_words.py)."""

import pytest

from desktop.call.turn_words import asks_question, leaves_open


@pytest.mark.parametrize("text", [
    "I would like to", "So,", "So, um", "My favourite colour is blue and", "Um.", "I was thinking about the",
    "Can you tell me...", "Well, I -", "Because", "I'd like to know the", "and then I", "I would like to know.",
    "Can you tell me", "I was wondering if",
])
def test_open_endings(text: str) -> None:
    assert leaves_open(text)


@pytest.mark.parametrize("text", [
    "What is the capital of France?", "I think so.", "I hope so", "Thank you.", "How are you?",
    "What does it look like?", "Where are you from?", "", "   ", "Tell me about it.", "Yes, I can.",
])
def test_closed_endings(text: str) -> None:
    assert not leaves_open(text)


def test_a_finished_question_ends_with_a_question_mark_and_no_open_word():
    assert asks_question("What should I visit first?") and asks_question("  Is it far? ")
    assert not asks_question("I went to the shop.") and not asks_question("Can you tell me?")
    assert not asks_question("And so?") and not asks_question("")
