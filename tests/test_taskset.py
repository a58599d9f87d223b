"""TaskSet: tasks kept until they end; wait, settle and cancel_all; errors to sys.excepthook."""

import asyncio
import gc
import sys

from desktop.tasks import TaskSet


def test_a_spawned_task_is_kept_until_it_ends_and_wait_includes_tasks_started_meanwhile():
    async def main():
        tasks, done = TaskSet(), []

        async def later():
            await asyncio.sleep(0.01)
            done.append("later")

        async def first():
            await asyncio.sleep(0)
            gc.collect()  # only the set keeps the tasks alive
            tasks.spawn(later())
            done.append("first")

        tasks.spawn(first())
        assert len(tasks) == 1
        await tasks.wait()
        assert done == ["first", "later"] and len(tasks) == 0

    asyncio.run(main())


def test_cancel_all_spares_the_caller_and_settle_waits_for_the_others():
    async def main():
        tasks, seen = TaskSet(), []

        async def forever():
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise

        async def short():
            await asyncio.sleep(0.01)
            seen.append("short")

        async def closer(how):
            await asyncio.sleep(0)
            await getattr(tasks, how)()
            seen.append(how)

        tasks.spawn(forever())
        tasks.spawn(closer("cancel_all"))
        await tasks.wait()
        assert seen == ["cancelled", "cancel_all"]
        seen.clear()
        tasks.spawn(short())
        tasks.spawn(closer("settle"))
        await tasks.wait()
        assert seen == ["short", "settle"]

    asyncio.run(main())


def test_an_error_goes_to_the_excepthook_only_when_asked(monkeypatch):
    hooked = []
    monkeypatch.setattr(sys, "excepthook", lambda kind, exc, tb: hooked.append(exc))

    async def fail():
        raise RuntimeError("boom")

    async def main(report):
        tasks = TaskSet(report_errors=report)
        tasks.spawn(fail())
        await tasks.wait()

    asyncio.run(main(False))
    assert hooked == []
    asyncio.run(main(True))
    assert [str(e) for e in hooked] == ["boom"]
