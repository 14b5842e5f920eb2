"""``--on ADDRESS`` and Dask's TLS options: measure on the workers of a Dask scheduler.

``benchmark`` and ``gate`` take ``--on``; ``select --scheduler`` takes the TLS files. The
flags are Dask's own (``dask worker --tls-ca-file --tls-cert --tls-key``); nothing is imported
for ``--help``.
"""

from __future__ import annotations

import argparse
from typing import Any


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


def add_tls_flags(parser: argparse.ArgumentParser, *, title: str) -> Any:
    """``--tls-ca-file``/``--tls-cert``/``--tls-key`` in a group of their own; returns it."""
    group = parser.add_argument_group(title)
    group.add_argument(
        "--tls-ca-file",
        metavar="PEM",
        help="tls:// only: the CA certificate(s) that signed the scheduler's and workers' "
        "certificates (default: Dask's config, distributed.comm.tls.ca-file)",
    )
    group.add_argument(
        "--tls-cert",
        metavar="PEM",
        help="tls:// only: this client's certificate (default: distributed.comm.tls.client.cert)",
    )
    group.add_argument(
        "--tls-key",
        metavar="PEM",
        help="tls:// only: this client's private key, when --tls-cert's file does not hold it",
    )
    return group


def tls_files(args: argparse.Namespace) -> Any:
    """The ``--tls-*`` files given, as :class:`tfcompress._compat.dask.TLSFiles`."""
    from tfcompress._compat.dask import TLSFiles

    return TLSFiles(args.tls_ca_file, args.tls_cert, args.tls_key)


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
