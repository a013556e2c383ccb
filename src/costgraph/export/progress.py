"""A progress bar for long commands (the planner's search, sweeps), drawn by
:mod:`rich` on standard error — never on standard output, whose text is the
result — and only when standard error is a terminal and the work has already
taken more than a second (quick runs and pipes see nothing)."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager

#: seconds of work before the bar appears
DELAY = 1.0


def stderr_console(force: bool = False):
    """The rich Console of standard error. Colour follows the usual habits, as rich reads them:
    ``NO_COLOR`` (set and not empty: no colour, https://no-color.org) and ``FORCE_COLOR`` (set and
    not empty: drawn as on a terminal even through a pipe); ``force`` draws as on a terminal too."""
    from rich.console import Console

    return Console(stderr=True, force_terminal=True if force else None)


class _Bar:
    def __init__(self, description: str, total: float | None, delay: float, force: bool, console=None):
        self.description, self.total, self.delay, self.force = description, total, delay, force
        self.console = console
        self.start = time.monotonic()
        self.done = 0.0
        self._progress = None
        self._task = None

    def _show(self) -> None:
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)

        console = self.console or stderr_console(self.force)
        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), TimeRemainingColumn(), console=console, transient=True)
        self._progress.start()
        self._task = self._progress.add_task(self.description, total=self.total, completed=self.done)

    def advance(self, n: float = 1, description: str | None = None) -> None:
        """Count ``n`` more units of work done (and optionally rename the step)."""
        self.done += n
        if description:
            self.description = description
        if self._progress is None and (self.force or self.console is not None or sys.stderr.isatty()) \
                and time.monotonic() - self.start > self.delay:
            self._show()
        if self._progress is not None:
            self._progress.update(self._task, completed=self.done, total=self.total, description=self.description)

    def update(self, done: float, total: float | None = None, description: str | None = None) -> None:
        """Set the work done so far (and the total, and the step's name)."""
        if total is not None:
            self.total = total
        self.advance(done - self.done, description)

    @property
    def shown(self) -> bool:
        return self._progress is not None

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()


@contextmanager
def progress(description: str, total: float | None = None, *, delay: float = DELAY, force: bool = False,
             console=None):
    """``with progress("planning", total=n) as bar: ... bar.advance()`` — a bar on stderr after
    ``delay`` seconds when stderr is a terminal (``force=True``, or a rich ``console`` given:
    always, for tests)."""
    bar = _Bar(description, total, delay, force, console)
    try:
        yield bar
    finally:
        bar.close()
