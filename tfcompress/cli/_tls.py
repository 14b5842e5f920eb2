"""Dask's ``--tls-ca-file``/``--tls-cert``/``--tls-key``: a client's files for ``tls://``.

``--on`` of ``benchmark`` and ``gate`` takes them, and ``select --scheduler``. Nothing is
imported for ``--help``.
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
