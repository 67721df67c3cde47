"""Total deadlines: how long something may take in all, whatever its parts' own timeouts.

httpx's ``timeout`` bounds each read (and connect, write) on its own, so a server that sends one byte
every few seconds never reaches it; a deadline bounds the whole request, reading the body included. The
judge bounds each judged metric of a sample the same way. A :data:`Deadline` is ``asyncio.timeout`` by
default (raising ``TimeoutError`` when the time runs out); tests inject one they expire on an event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

#: ``deadline(seconds)``: an async context manager that cancels its body and raises ``TimeoutError``
#: once ``seconds`` have passed (``asyncio.timeout``'s contract).
Deadline = Callable[[float], AbstractAsyncContextManager[object]]


#: ``asyncio.timeout(seconds)``: the event loop's clock. The function itself, not a wrapper calling it:
#: every judge call takes two deadlines (its metric's and its request's).
system_deadline: Deadline = asyncio.timeout
