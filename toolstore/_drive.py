"""The drivers of step generators: a generator does no I/O, yields what it needs from outside (a step) and is sent the
answer, or has the driver's exception thrown in at that point, and returns its result. :func:`drive` and :func:`adrive`
run one with a function that answers a step (synchronous or on asyncio) and hold no logic of what the steps are: the
route path (``_steps``), the catalog reads (``_reads``) and the agent loops (``_agents``, whose generators yield
another driver's questions) are all run by them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

T = TypeVar("T")
S = TypeVar("S")  # what a generator yields: a Step of the route path, or another driver's question (``_agents``)


def drive(steps: Generator[S, Any, T], answer: Callable[[S], Any]) -> T:
    """Run ``steps`` to their result, answering each step with ``answer`` (its exceptions are thrown in; one that is
    no Exception, KeyboardInterrupt, ends them there: :func:`adrive`)."""
    try:
        step = next(steps)
        while True:
            try:
                value = answer(step)
            except Exception as exc:
                step = steps.throw(exc)
            except BaseException:
                steps.close()
                raise
            else:
                step = steps.send(value)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def adrive(steps: Generator[S, Any, T], answer: Callable[[S], Awaitable[Any]]) -> T:
    """:func:`drive` with an async ``answer``. A cancellation (asyncio.CancelledError) closes the steps where it
    reaches them, in the task's context, so the spans they hold end there rather than when they are collected, in
    another context (where OpenTelemetry cannot detach them, and logs an error)."""
    try:
        step = next(steps)
        while True:
            try:
                value = await answer(step)
            except Exception as exc:
                step = steps.throw(exc)
            except BaseException:
                steps.close()
                raise
            else:
                step = steps.send(value)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
