"""``--on ADDRESS`` and Dask's TLS options: measure on the workers of a Dask scheduler.

``benchmark`` and ``gate`` take them. The TLS flags are Dask's own (``dask worker
--tls-ca-file --tls-cert --tls-key``, in :mod:`._tls`); nothing is imported for ``--help``.
"""

from __future__ import annotations

import argparse
from typing import Any

from tfcompress.cli._tls import add_tls_flags, tls_files


def add_on_flags(parser: argparse.ArgumentParser, *, what: str) -> None:
    """``--on`` and ``--tls-ca-file``/``--tls-cert``/``--tls-key``.

    Args:
        parser: The subcommand's parser.
        what: What runs on the devices, in words ("measure every row").
    """
    group = add_tls_flags(parser, title="devices (docs/devices.md)")
    group.add_argument(
        "--on",
        metavar="ADDRESS",
        help=f"{what} on the workers of this Dask scheduler, each a device started with "
        "`dask worker ADDRESS --name NAME` in `pip install 'tfcompress[device]'`: "
        "tcp://HOST:8786, or tls://HOST:8786 with the files below; a scheduler runs whatever "
        "its clients send (docs/devices.md, security)",
    )


def connect_on(args: argparse.Namespace) -> Any:
    """The Dask client of ``--on`` (None without it); the caller closes it.

    Raises:
        InvalidInputError: TLS files without ``--on``, or what :func:`tfcompress._compat.dask.
            connect` refuses (a malformed or unreachable address: one line, exit 2).
    """
    from tfcompress._compat.dask import connect
    from tfcompress.errors import InvalidInputError

    tls = tls_files(args)
    if args.on is None:
        if tls.given:
            raise InvalidInputError(
                "--tls-ca-file/--tls-cert/--tls-key secure the connection of --on; give "
                "--on tls://HOST:PORT too, or drop them."
            )
        return None
    return connect(args.on, tls=tls, flag="--on")
