"""``--on ADDRESS`` and Dask's TLS options: measure on the workers of a Dask scheduler.

``benchmark``, ``gate``, ``compress`` and ``select`` take them (``compress`` and ``select``
with ``--device``: one search times on one device). The TLS flags are Dask's own (``dask worker
--tls-ca-file --tls-cert --tls-key``); nothing is imported for ``--help``.
"""

from __future__ import annotations

import argparse
from typing import Any


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


def add_on_flags(parser: argparse.ArgumentParser, *, what: str, group: Any = None) -> None:
    """``--on`` and ``--tls-ca-file``/``--tls-cert``/``--tls-key``.

    Args:
        parser: The subcommand's parser.
        what: What runs on the devices, in words ("measure every row").
        group: The TLS flags' group when the parser has them already (``select``'s, for
            ``--scheduler``): ``--on`` joins it and shares the files. None: added here.
    """
    if group is None:
        group = add_tls_flags(parser, title="devices (docs/devices.md)")
    group.add_argument(
        "--on",
        metavar="ADDRESS",
        help=f"{what} on the workers of this Dask scheduler, each a device started with "
        "`dask worker ADDRESS --name NAME` in `pip install 'tfcompress[device]'`: "
        "tcp://HOST:8786, or tls://HOST:8786 with the files below; a scheduler runs whatever "
        "its clients send (docs/devices.md, security)",
    )


def add_device_flag(parser: argparse.ArgumentParser, *, what: str) -> None:
    """``--device NAME``: the one worker of ``--on`` a search measures on.

    Args:
        parser: The subcommand's parser.
        what: What the device does, in words ("times every attempt").
    """
    parser.add_argument(
        "--device",
        metavar="NAME",
        help=f"with --on: the worker (dask worker --name NAME) that {what}; default: the only "
        "one (several connected and none named is refused: latencies of one search are "
        "compared on one device)",
    )


def connect_on(args: argparse.Namespace, *, shared_tls: bool = False) -> Any:
    """The Dask client of ``--on`` (None without it); the caller closes it.

    Args:
        args: The parsed flags.
        shared_tls: The ``--tls-*`` files also secure another address (``select
            --scheduler``): they are not refused without ``--on``, and a ``tcp://`` ``--on``
            connects without them.

    Raises:
        InvalidInputError: TLS files without ``--on``, or what :func:`tfcompress._compat.dask.
            connect` refuses (a malformed or unreachable address: one line, exit 2).
    """
    from tfcompress._compat.dask import connect
    from tfcompress.errors import InvalidInputError

    tls = tls_files(args)
    if args.on is None:
        if tls.given and not shared_tls:
            raise InvalidInputError(
                "--tls-ca-file/--tls-cert/--tls-key secure the connection of --on; give "
                "--on tls://HOST:PORT too, or drop them."
            )
        return None
    if shared_tls and not str(args.on).startswith("tls://"):
        tls = type(tls)()  # the files are the other address's
    return connect(args.on, tls=tls, flag="--on")
