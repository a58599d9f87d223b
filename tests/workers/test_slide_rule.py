"""The sliding window's rule (workers/slide.py), pure: which message the view starts at, block by
block, stable from turn to turn, and the turn structure kept valid."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from desktop.workers.slide import view_start

W = 400  # the window; blocks of 100


def conv(turns: list[tuple[int, int]], system: int = 20) -> tuple[list[int], list[str]]:
    lengths, roles = [system] if system else [], ["system"] if system else []
    for user, reply in turns:
        lengths += [user, reply]
        roles += ["user", "assistant"]
    return lengths, roles


def test_nothing_leaves_while_it_fits():
    lengths, roles = conv([(30, 50)] * 3)
    assert view_start(lengths, roles, reserve=50, window=W) == 0


def test_the_view_starts_at_a_user_message_past_the_block_and_fits():
    lengths, roles = conv([(30, 50)] * 6)  # 20 + 480 tokens
    start = view_start(lengths, roles, reserve=50, window=W)
    assert roles[start] == "user" and start > 1
    assert lengths[0] + sum(lengths[start:]) + 50 <= W
    # need = 150 → two blocks dropped (200): the first user message starting at or after 200
    starts = [sum(lengths[1:i]) for i in range(1, len(lengths))]
    assert sum(lengths[1:start]) >= 200 and all(s < 200 for i, s in enumerate(starts, 1) if i < start and roles[i] == "user")


def test_the_last_user_message_is_always_visible():
    lengths, roles = conv([(30, 50), (30, 50), (900, 0)])[0][:-1], conv([(30, 50), (30, 50), (900, 0)])[1][:-1]
    assert view_start(lengths, roles, reserve=50, window=W) == len(roles) - 1
    # a single message after the system prompt that is too long: nothing to drop, the caller refuses
    assert view_start([20, 900], ["system", "user"], reserve=50, window=W) == 0


def test_no_system_prompt():
    lengths, roles = conv([(30, 50)] * 8, system=0)
    start = view_start(lengths, roles, reserve=0, window=W)
    assert start > 0 and roles[start] == "user" and sum(lengths[start:]) <= W


TURNS = st.lists(st.tuples(st.integers(1, 60), st.integers(1, 90)), min_size=1, max_size=60)


@settings(max_examples=300, deadline=None)
@given(turns=TURNS, system=st.integers(0, 40), reserve=st.integers(0, 100))
def test_successive_turns_keep_their_first_message_until_the_next_block(turns, system, reserve):
    """Turn by turn (each turn = the previous conversation + a user message): the start never
    goes back, it changes at most once per block of growth, and the view always fits when more
    than the last message could be kept."""
    block = W // 4
    starts, blocks, slides = [], [], 0
    for t in range(1, len(turns) + 1):
        lengths, roles = conv(turns[:t], system)
        lengths, roles = lengths[:-1], roles[:-1]  # the request ends with the user's new message
        start = view_start(lengths, roles, reserve, W)
        first = 1 if system else 0
        if start:
            assert roles[start] == "user"
            assert start == len(roles) - 1 or sum(lengths[:first]) + sum(lengths[start:]) + reserve <= W
        need = sum(lengths) + reserve - W
        blocks.append(-(-need // block) if need > 0 else 0)
        if starts and start != starts[-1]:
            assert start > starts[-1], "the view went back"
            assert blocks[-1] > blocks[-2], "the view slid inside a block"
            slides += 1
        starts.append(start)
    assert slides <= blocks[-1]  # at most one slide per B tokens of growth


def test_the_same_conversation_gives_the_same_view():
    lengths, roles = conv([(17 * i % 50 + 5, 31 * i % 80 + 3) for i in range(40)])
    assert len({view_start(list(lengths), list(roles), 60, W) for _ in range(3)}) == 1
