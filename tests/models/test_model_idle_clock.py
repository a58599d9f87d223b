"""The idle unload's clock: idle time restarts with any activity, a request between two ticks included."""

from desktop.models.idle import IdleClock


def test_idle_minutes_count_from_the_last_activity():
    clock = IdleClock(0.0)
    clock.observe(0.0, busy=False, submitted=3)
    assert not clock.due(299.0, 5) and clock.due(300.0, 5)
    assert not clock.due(10_000.0, 0)  # 0 minutes: never
    clock.observe(200.0, busy=True, submitted=3)  # a request runs
    assert not clock.due(300.0, 5) and clock.due(500.0, 5)
    clock.observe(400.0, busy=False, submitted=4)  # one came and went between two ticks
    assert not clock.due(500.0, 5) and clock.due(700.0, 5)
    clock.observe(700.0, busy=False, submitted=4)  # nothing new
    assert clock.due(700.0, 5) and clock.idle_s(700.0) == 300.0
