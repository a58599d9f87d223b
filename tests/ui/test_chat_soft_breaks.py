"""Chat replies keep their line breaks and the indentation of unfenced code: the Markdown transform
(tables of inputs and the Markdown it gives) and the real reply view (one line per source line,
fences and lists still rendered as such, a screenshot in test-artifacts/)."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QTextFormat

from desktop.ui.chat.message_widget import MessageWidget
from desktop.ui.chat.soft_breaks import BREAK_MARK as M, NBSP, keep_line_breaks

N4 = NBSP * 4
CODE = ('def add_two_numbers(num1, num2):\n    """This function adds."""\n    if num1 + num2 == 3:\n'
        '        return True\n    return num1 + num2')

CASES = {
    "one line": ("Hello there", "Hello there"),
    "a poem": ("Roses are red\nViolets are blue", f"Roses are red{M}\nViolets are blue"),
    "blank-line paragraphs": ("one\ntwo\n\nthree", f"one{M}\ntwo\n\nthree"),
    "unfenced code": (CODE, f'def add_two_numbers(num1, num2):{M}\n{N4}"""This function adds."""{M}\n'
                            f"{N4}if num1 + num2 == 3:{M}\n{N4}{N4}return True{M}\n{N4}return num1 + num2"),
    "unfenced code with a blank line goes on as text": (
        "def f():\n    x = 1\n\n    return x", f"def f():{M}\n{N4}x = 1\n\n{N4}return x"),
    "indented code after prose stays code": (
        "Run this:\n\n    make all\n      --jobs 2\n\n    make test\nDone.", "Run this:\n\n    make all\n      --jobs 2\n\n    make test\nDone."),
    "indented code at the start stays code": ("    x = 1\n    y = 2", "    x = 1\n    y = 2"),
    "a few leading spaces": ("  centred\n   more", f"{NBSP * 2}centred{M}\n{NBSP * 3}more"),
    "tabs count as four": ("if x:\n\treturn", f"if x:{M}\n{N4}return"),
    "CRLF and CR": ("a\r\nb\rc\r\n\r\nd", f"a{M}\nb{M}\nc\n\nd"),
    "trailing spaces and backslash breaks": ("a  \nb\\\nc\\\\\nd", f"a{M}\nb{M}\nc\\\\{M}\nd"),
    "fenced code unchanged": ("Code:\n```python\ndef f():\n\n    return 1\n```\nafter\nmore",
                              f"Code:\n```python\ndef f():\n\n    return 1\n```\nafter{M}\nmore"),
    "a fence still streaming": ("Code:\n```py\nx = 1\n    y", "Code:\n```py\nx = 1\n    y"),
    "a half-arrived fence is text": ("Code:\n``", f"Code:{M}\n``"),
    "a longer closing fence, tildes": ("~~~~\na\n~~~\nb\n~~~~~\nc\nd", f"~~~~\na\n~~~\nb\n~~~~~\nc{M}\nd"),
    "backticks in the info string: not a fence": ("a\n``` x ` y", f"a{M}\n``` x ` y"),
    "a list": ("Steps:\n- one\n- two\n\n1. first\n2. second", "Steps:\n- one\n- two\n\n1. first\n2. second"),
    "a list item's lines": ("- one\n  more\n- two", f"- one{M}\n  more\n- two"),
    "nested lists with leading spaces": ("- a\n  - b\n    - c\n  - d\n- e", "- a\n  - b\n    - c\n  - d\n- e"),
    "nested under a numbered item with four spaces": ("1. a\n    - b\n2. c", "1. a\n    - b\n2. c"),
    "a paragraph inside a list item": ("1. a\n\n   more\n2. b", "1. a\n\n   more\n2. b"),
    "code inside a list item keeps its extra indent": (
        "- f:\n  def f():\n      return 1", f"- f:{M}\n  def f():{M}\n  {N4}return 1"),
    "a list ends at an unindented paragraph": ("- a\n\nafter\n  x", f"- a\n\nafter{M}\n{NBSP * 2}x"),
    "2. cannot interrupt a paragraph": ("Roses\n2. not a list", f"Roses{M}\n2. not a list"),
    "headings and rules": ("# Title\ntext\n\nSub\n---\n***\nend", "# Title\ntext\n\nSub\n---\n***\nend"),
    "setext heading of two lines": ("a\nb\n===", f"a{M}\nb\n==="),
    "a block quote": ("> a\n> b\n>\n> c", f"> a{M}\n> b\n>\n> c"),
    "a quote with a list inside": ("> - a\n> - b", "> - a\n> - b"),
    "a table": ("| a | b |\n|---|:-:|\n| 1 | 2 |\n\nafter", "| a | b |\n|---|:-:|\n| 1 | 2 |\n\nafter"),
    "a table right under text gets its blank line": (
        "Here:\n| a | b |\n| --- | --- |\n| 1 | 2 |", "Here:\n\n| a | b |\n| --- | --- |\n| 1 | 2 |"),
    "a table header still streaming is text": ("Here:\n| a | b |", f"Here:{M}\n| a | b |"),
    "a table without outer pipes": ("a | b\n--|--\n1 | 2", "a | b\n--|--\n1 | 2"),
    "a list item whose text starts on the next line": ("1.\n   foo\n   bar\n-\n  baz", f"1.\n   foo{M}\n   bar\n-\n  baz"),
    "a one-dash setext underline": ("text\n-\nmore", "text\n-\nmore"),
    "a 4-space line continuing a paragraph is text": ("text\n    # not a heading", f"text{M}\n{N4}# not a heading"),
}


@pytest.mark.parametrize("source,expected", CASES.values(), ids=CASES.keys())
def test_keep_line_breaks(source, expected):
    assert keep_line_breaks(source) == expected


def test_every_prefix_of_a_streaming_reply_transforms():
    """While a reply streams, every prefix is rendered: each keeps its text (only marks and
    NBSPs added), and a prefix that ends inside an open fence leaves that code as it came."""
    reply = "Intro:\n- a\n  - b\n\n| x | y |\n|---|---|\n| 1 | 2 |\n\n```py\ndef f():\n    return 1\n```\n" + CODE
    for end in range(len(reply) + 1):
        shown = keep_line_breaks(reply[:end])
        assert shown.replace(M, "").replace(NBSP, " ") == reply[:end]
    assert keep_line_breaks(reply[: reply.index("return 1") + 4]).endswith("```py\ndef f():\n    retu")


def reply(qtbot, text: str, role: str = "assistant") -> MessageWidget:
    widget = MessageWidget(role, text, index=1)
    qtbot.addWidget(widget)
    widget.resize(560, 400)
    widget.show()
    return widget


def blocks(doc):
    block = doc.begin()
    while block.isValid():
        yield block
        block = block.next()


def test_unfenced_code_shows_one_line_per_source_line_with_its_indentation(qtbot):
    doc = reply(qtbot, CODE).body.document()
    assert doc.toPlainText() == CODE  # Qt's plain text turns the line separators and NBSPs back
    (block,) = list(blocks(doc))  # one paragraph: its lines are not spaced out like paragraphs
    layout = block.layout()
    assert layout.lineCount() == 5
    lefts = [layout.lineAt(n).naturalTextRect().left() for n in range(5)]
    starts = [layout.lineAt(n).textStart() for n in range(5)]
    text = block.text()
    first_char = [text[s:].lstrip("\u00a0")[:1] for s in starts]
    assert first_char == ["d", '"', "i", "r", "r"]
    # the indentation is there as width: "return True" is drawn further right than "if"
    widths = [layout.lineAt(n).cursorToX(s + len(text[s:]) - len(text[s:].lstrip("\u00a0")))[0] for n, s in enumerate(starts)]
    assert widths[0] == lefts[0] and widths[1] > widths[0] and widths[3] > widths[2] > widths[0]
    assert widths[1] == widths[2] == widths[4]


def test_markdown_still_renders_fences_lists_and_emphasis(qtbot):
    text = ("A list:\n- one\n- two\n  - nested\n\n**Step 1:**\nDo _this_\n\n```python\ndef f():\n\n    return 1\n```\n"
            "| a | b |\n|---|---|\n| 1 | 2 |")
    doc = reply(qtbot, text).body.document()
    found = {b.text(): b for b in blocks(doc)}
    assert found["one"].textList() and found["two"].textList() and found["nested"].textList()
    assert found["nested"].textList() is not found["one"].textList()  # its own, nested list
    assert found["Step 1:\u2028Do this"].blockFormat().headingLevel() == 0
    bold = found["Step 1:\u2028Do this"].begin().fragment().charFormat()
    assert bold.fontWeight() > 400
    code = [b for b in blocks(doc) if b.blockFormat().hasProperty(QTextFormat.Property.BlockCodeFence)]
    assert [b.text() for b in code] == ["def f():", "", "    return 1"]
    assert "a" in found and "2" in found  # table cells, one block each
    assert "\u205f" not in doc.toPlainText()


def test_the_users_own_message_keeps_its_lines(qtbot):
    text = "first line\n    indented\n- not a list\n\nlast"
    assert reply(qtbot, text, role="user").body.document().toPlainText() == text


def test_a_reply_with_unfenced_code_a_list_and_a_fence(qtbot, screenshot):
    text = ("Here is the function:\n" + CODE + "\n\nWhat it does:\n- adds two numbers\n- says **True** when the sum is 3\n"
            "  - otherwise the sum\n\nA haiku about it:\nTwo numbers meet\n  and become one\nthree is special\n\n"
            "With a fence:\n```python\nprint(add_two_numbers(1, 2))\n```")
    widget = reply(qtbot, text)
    qtbot.wait(50)
    lines = widget.body.document().toPlainText().split("\n")
    assert lines[:6] == ["Here is the function:"] + CODE.split("\n")
    assert "  and become one" in lines
    screenshot(widget, "chat-line-breaks")
