"""Keep stdout clean for machine-readable output and errors to one line on stderr."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from typing import IO, NoReturn


class OneLineArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line (plus the exit code 2)."""

    def error(self, message: str) -> NoReturn:
        """Print ``prog: error: message (see --help)`` and exit 2."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


@contextlib.contextmanager
def protected_stdout() -> Iterator[IO[str]]:
    """Point file descriptor 1 at stderr for the block and yield the real stdout.

    TensorFlow, Keras and the converter print to stdout from Python and C++; inside this
    block only what the command writes to the yielded stream reaches stdout.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    real = os.fdopen(os.dup(saved), "w", encoding="utf-8", closefd=True)
    python_stdout = sys.stdout
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        yield real
    finally:
        real.flush()
        sys.stdout = python_stdout
        os.dup2(saved, 1)
        os.close(saved)
        real.close()
