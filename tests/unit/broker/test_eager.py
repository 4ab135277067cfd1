"""broker/network/eager.py: a handler coroutine stepped by hand finishes without a Task, and one
that waits is driven to the end by a Task with asyncio's own semantics (results,
exceptions, a bare yield, cancellation) on a real uvloop loop."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import uvloop

from broker.network import eager


def _run(scenario: Any) -> None:
    uvloop.run(scenario())


def test_a_coroutine_that_never_waits_finishes_at_once_without_a_task():
    async def handler(x: int) -> int:
        return x + 1

    async def scenario() -> None:
        before = len(asyncio.all_tasks())
        finished, value = eager.start(asyncio.get_running_loop(), handler(41))
        assert (finished, value) == (True, 42)
        assert len(asyncio.all_tasks()) == before

    _run(scenario)


def test_an_exception_of_the_first_step_reaches_the_caller():
    async def handler() -> None:
        raise ValueError("bad request")

    async def scenario() -> None:
        with pytest.raises(ValueError, match="bad request"):
            eager.start(asyncio.get_running_loop(), handler())

    _run(scenario)


def test_a_coroutine_that_waits_gets_its_futures_results_and_exceptions_in_a_task():
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        first, second = loop.create_future(), loop.create_future()
        seen: list[Any] = []

        async def handler() -> str:
            seen.append(await first)
            await asyncio.sleep(0)  # a bare yield
            try:
                await second
            except KeyError as exc:
                seen.append(repr(exc))
            seen.append(await asyncio.sleep(0.01, result="slept"))
            return "done"

        finished, task = eager.start(loop, handler())
        assert not finished and isinstance(task, asyncio.Task)
        loop.call_later(0.01, first.set_result, "one")
        loop.call_later(0.02, second.set_exception, KeyError("two"))
        assert await asyncio.wait_for(task, 5) == "done"
        assert seen == ["one", "KeyError('two')", "slept"]

    _run(scenario)


def test_cancelling_the_task_cancels_what_it_waits_on_and_the_coroutine_sees_it():
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        pending = loop.create_future()
        cleaned: list[str] = []

        async def handler() -> None:
            try:
                await pending
            finally:
                cleaned.append("finally ran")

        finished, task = eager.start(loop, handler())
        assert not finished
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)
        assert pending.cancelled()
        assert cleaned == ["finally ran"]

    _run(scenario)


def test_a_coroutine_that_handles_its_cancellation_returns_its_answer():
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        inner = loop.create_task(asyncio.sleep(30))

        async def handler() -> str:
            try:
                await inner
            except asyncio.CancelledError:
                return "gave up"
            return "slept"

        finished, task = eager.start(loop, handler())
        assert not finished
        await asyncio.sleep(0.01)
        task.cancel()
        assert await asyncio.wait_for(task, 5) == "gave up"
        await asyncio.sleep(0)
        assert inner.cancelled()

    _run(scenario)
