"""Dask's distributed client: the one place that connects to a scheduler.

``select --scheduler`` trains candidates on a scheduler's workers; ``benchmark --on`` (and
``gate``, ``compress``, ``select`` with ``--on``) measures on them, each worker a device. A
scheduler runs whatever its clients send (docs/devices.md): over ``tcp://`` anyone who
reaches its port can; ``tls://`` with certificates (Dask's own TLS: a CA that signed every
scheduler, worker and client certificate) lets in only holders of one.

Example:
    >>> client = connect("tcp://127.0.0.1:8786")  # doctest: +SKIP
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from tfcompress.errors import InvalidInputError, MissingDependencyError

DASK_HINT = "pip install 'tfcompress[distributed]' (on a device: 'tfcompress[device]')"
SCHEMES = ("tcp", "tls")


@dataclass(frozen=True)
class TLSFiles:
    """The client's TLS files for a ``tls://`` scheduler (Dask's ``--tls-*`` options).

    Any left None comes from Dask's configuration (``distributed.comm.tls.ca-file``,
    ``distributed.comm.tls.client.cert``/``.key``, or ``DASK_DISTRIBUTED__COMM__TLS__...``).

    Example:
        >>> TLSFiles(ca_file="ca.pem", cert="client.pem", key="client.key").given
        True
    """

    ca_file: str | None = None
    cert: str | None = None
    key: str | None = None

    @property
    def given(self) -> bool:
        """Whether any file was named (else Dask's configuration decides)."""
        return any(v is not None for v in (self.ca_file, self.cert, self.key))


def is_dask_client(obj: Any) -> bool:
    """True for a ``dask.distributed.Client`` (checked without importing Dask).

    Example:
        >>> is_dask_client(object())
        False
    """
    return type(obj).__module__.startswith("distributed") and hasattr(obj, "submit")


def connect(
    address: str,
    *,
    timeout_s: float = 5.0,
    tls: TLSFiles | None = None,
    flag: str = "--scheduler",
) -> Any:
    """A Dask client connected to ``address`` (``tcp://HOST:PORT`` or ``tls://HOST:PORT``).

    Args:
        address: The scheduler's address, as ``dask scheduler`` prints it.
        timeout_s: Seconds to wait for the connection.
        tls: The client's certificate files for a ``tls://`` address (None: Dask's config).
        flag: The option that named the address, for messages.

    Returns:
        The connected ``distributed.Client`` (not the default client).

    Raises:
        MissingDependencyError: Dask's distributed package is not installed.
        InvalidInputError: A malformed address, TLS files for a ``tcp://`` address or
            unreadable ones, or a scheduler that cannot be reached in ``timeout_s`` seconds.

    Example:
        >>> files = TLSFiles("ca.pem", "client.pem", "client.key")
        >>> client = connect("tls://10.0.0.5:8786", tls=files)  # doctest: +SKIP
    """
    try:
        from distributed import Client
    except ImportError as error:
        raise MissingDependencyError(
            f"{flag} needs Dask's distributed scheduler client; {DASK_HINT}."
        ) from error
    scheme = _check_address(address, flag)
    security = _security(scheme, tls or TLSFiles(), flag)
    # Dask's own handshake first: a Client that fails to connect complains again from its
    # destructor at exit, and the CLI promises one line.
    _probe(address, timeout_s, security)
    try:
        return Client(address, timeout=f"{timeout_s}s", set_as_default=False, security=security)
    except (OSError, TimeoutError, ValueError) as error:
        raise _unreachable(address, timeout_s, error) from error


def _check_address(address: str, flag: str) -> str:
    scheme, _, rest = address.rpartition("://")
    host, _, port = rest.rpartition(":")
    if scheme not in SCHEMES or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidInputError(
            f"{flag} address {address[:100]!r} is not tcp://HOST:PORT or tls://HOST:PORT with a "
            "port from 1 to 65535; copy the address `dask scheduler` prints (e.g. "
            "tcp://10.0.0.5:8786)."
        )
    return scheme


def _security(scheme: str, tls: TLSFiles, flag: str) -> Any:
    """Dask's ``Security`` for a ``tls://`` address; None (plain TCP) for ``tcp://``."""
    if scheme == "tcp":
        if tls.given:
            raise InvalidInputError(
                f"--tls-ca-file/--tls-cert/--tls-key secure a tls:// scheduler; {flag} names a "
                "tcp:// one, which is neither encrypted nor authenticated: use its tls:// address "
                "(docs/devices.md) or drop the files."
            )
        return None
    for what, path in (
        ("--tls-ca-file", tls.ca_file),
        ("--tls-cert", tls.cert),
        ("--tls-key", tls.key),
    ):
        if path is not None and not os.path.isfile(path):
            raise InvalidInputError(f"{what} {path[:200]!r}: no such file; give the PEM file.")
    from distributed.security import Security

    given = {
        "tls_ca_file": tls.ca_file,
        "tls_client_cert": tls.cert,
        "tls_client_key": tls.key,
    }
    security = Security(require_encryption=True, **{k: v for k, v in given.items() if v})
    if not security.tls_ca_file or not security.tls_client_cert:
        raise InvalidInputError(
            f"{flag} names a tls:// scheduler: give the CA file and this client's certificate "
            "(--tls-ca-file CA.pem --tls-cert CLIENT.pem [--tls-key CLIENT.key]) or set them in "
            "Dask's configuration (distributed.comm.tls.ca-file, distributed.comm.tls.client.cert)."
        )
    return security


def _probe(address: str, timeout_s: float, security: Any) -> None:
    import asyncio

    from distributed.comm import connect as dask_connect

    arguments = {} if security is None else security.get_connection_args("client")

    async def handshake() -> None:
        comm = await dask_connect(address, timeout=timeout_s, **arguments)
        await comm.close()

    async def bounded() -> None:
        # connect's own timeout covers the TCP connection and Dask's handshake only in
        # part: a server that accepts and never answers must not hang the command.
        await asyncio.wait_for(handshake(), timeout=timeout_s)

    try:
        asyncio.run(bounded())
    except (OSError, TimeoutError) as error:
        raise _unreachable(address, timeout_s, error) from error
    # Anything else is what a server that is not a Dask scheduler made Dask's protocol code
    # raise (a huge frame, bytes msgpack cannot decode): a wrong address, said in one line.
    except Exception as error:
        reason = " ".join(str(error).split())[:120] or type(error).__name__
        raise InvalidInputError(
            f"{address!r} answered, but not as a Dask scheduler ({type(error).__name__}: "
            f"{reason}); check the port (`dask scheduler` prints its address, 8786 by default)."
        ) from error


def _unreachable(address: str, timeout_s: float, error: BaseException) -> InvalidInputError:
    reason = " ".join(str(error).split())[:200] or type(error).__name__
    return InvalidInputError(
        f"cannot reach the Dask scheduler at {address!r} within {timeout_s:g} s ({reason}); "
        "start it with `dask scheduler` and check the address, the firewall and, for tls://, "
        "the certificates."
    )
