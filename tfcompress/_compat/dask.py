"""Dask's distributed client: the one place that connects to a scheduler.

``select --scheduler`` trains candidates on a scheduler's workers; ``benchmark --on`` (and
``gate``, ``compress``, ``select`` with ``--on``) measures on them, each worker a device. A
scheduler runs whatever its clients send (docs/devices.md): over ``tcp://`` anyone who
reaches its port can; ``tls://`` with certificates (Dask's own TLS: a CA that signed every
scheduler, worker and client certificate) lets in only holders of one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import traceback
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from tfcompress.errors import InvalidInputError, MissingDependencyError, shown_name

DASK_HINT = "pip install 'tfcompress[distributed]' (on a device: 'tfcompress[device]')"
SCHEMES = ("tcp", "tls")
#: Bytes one message from the scheduler may announce on a connection :func:`connect` opens:
#: Dask reserves a frame's announced size before reading it, and what a scheduler sends a
#: client (its workers, a row's figures) is far smaller.
MAX_FRAME_BYTES = 64 * 2**20
# The bound of the Dask reads in this context: tasks inherit it (the connection check, and the
# Client's tasks started from the thread that connects), any other Dask comm keeps none.
_FRAME_LIMIT: ContextVar[int | None] = ContextVar("tfcompress_dask_frame_limit", default=None)


@dataclass(frozen=True)
class TLSFiles:
    """The client's TLS files for a ``tls://`` scheduler (Dask's ``--tls-*`` options).

    Any left None comes from Dask's configuration (``distributed.comm.tls.ca-file``,
    ``distributed.comm.tls.client.cert``/``.key``, or ``DASK_DISTRIBUTED__COMM__TLS__...``).
    """

    ca_file: str | None = None
    cert: str | None = None
    key: str | None = None

    @property
    def given(self) -> bool:
        """Whether any file was named (else Dask's configuration decides)."""
        return any(v is not None for v in (self.ca_file, self.cert, self.key))


def is_dask_client(obj: Any) -> bool:
    """True for a ``dask.distributed.Client`` (checked without importing Dask)."""
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
    _bound_frames()
    token = _FRAME_LIMIT.set(MAX_FRAME_BYTES)
    try:
        with _dask_quiet():
            # Dask's own handshake first: a Client that fails to connect complains again
            # from its destructor at exit, and the CLI promises one line.
            _probe(address, timeout_s, security)
            try:
                return Client(
                    address, timeout=f"{timeout_s}s", set_as_default=False, security=security
                )
            except (OSError, TimeoutError, ValueError) as error:
                raise _unreachable(address, timeout_s, error) from error
    finally:
        _FRAME_LIMIT.reset(token)


def workers_now(client: Any) -> dict[str, dict[str, Any]]:
    """Every worker the scheduler has now, by address, asked of the scheduler afresh.

    Not ``Client.scheduler_info()``: it returns the client's cache, which the client's own
    refresh (every ``distributed.client.scheduler-info-interval``) rewrites without the
    workers, so a live cluster read between the two looked empty and its devices "left".
    """
    identity = client.scheduler.identity
    try:
        info = client.sync(identity, n_workers=-1)
    except TypeError:  # a scheduler from before n_workers (Dask < 2025) sends them all
        info = client.sync(identity)
    return dict(info.get("workers", {}))


def _check_address(address: str, flag: str) -> str:
    scheme, _, rest = address.rpartition("://")
    host, _, port = rest.rpartition(":")
    if scheme not in SCHEMES or not host or not port.isdigit() or not 0 < int(port[:6]) < 65536:
        raise InvalidInputError(
            f"{flag} address '{shown_name(address)}' is not tcp://HOST:PORT or tls://HOST:PORT "
            "with a "
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
    from distributed.security import Security

    given = {"tls_ca_file": tls.ca_file, "tls_client_cert": tls.cert, "tls_client_key": tls.key}
    try:
        security = Security(require_encryption=True, **{k: v for k, v in given.items() if v})
    except (ValueError, TypeError) as error:  # e.g. a TLS version Dask's configuration names
        raise InvalidInputError(
            f"Dask's TLS configuration is not usable ({shown_name(error)}); fix "
            "distributed.comm.tls in ~/.config/dask or the DASK_DISTRIBUTED__COMM__TLS__* "
            "variables."
        ) from error
    files = {
        "ca": (security.tls_ca_file, "--tls-ca-file" if tls.ca_file else _CONFIG["ca"]),
        "cert": (security.tls_client_cert, "--tls-cert" if tls.cert else _CONFIG["cert"]),
        "key": (security.tls_client_key, "--tls-key" if tls.key else _CONFIG["key"]),
    }
    if not files["ca"][0] or not files["cert"][0]:
        raise InvalidInputError(
            f"{flag} names a tls:// scheduler: give the CA file and this client's certificate "
            "(--tls-ca-file CA.pem --tls-cert CLIENT.pem [--tls-key CLIENT.key]) or set them in "
            "Dask's configuration (distributed.comm.tls.ca-file, distributed.comm.tls.client.cert)."
        )
    for path, source in files.values():
        if path and "\n" not in str(path) and not os.path.isfile(path):
            what = "not a file" if os.path.exists(path) else "no such file"
            raise InvalidInputError(f"{source} '{shown_name(path)}': {what}; give the PEM file.")
    try:  # the files are read here, so that a bad one is named, not met mid-connection
        security.get_connection_args("client")
    except (OSError, ValueError) as error:  # ssl.SSLError is an OSError
        path, source, what = _unusable(files)
        raise InvalidInputError(
            f"{source} '{shown_name(path)}' {what} ({shown_name(error)}); give the PEM files "
            "the cluster's CA made (docs/devices.md, TLS)."
        ) from error
    return security


_CONFIG = {  # where Dask's configuration names each file
    "ca": "distributed.comm.tls.ca-file (Dask's configuration)",
    "cert": "distributed.comm.tls.client.cert (Dask's configuration)",
    "key": "distributed.comm.tls.client.key (Dask's configuration)",
}


def _unusable(files: dict[str, tuple[Any, str]]) -> tuple[str, str, str]:
    """``(path, source, what is wrong)`` of the TLS file that OpenSSL refused."""
    import ssl

    def loads(path: str, load: Any) -> bool:
        try:
            load(path)
        except (OSError, ValueError):
            return False
        return True

    ca, cert, key = (files[k][0] for k in ("ca", "cert", "key"))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if "\n" not in str(ca) and not loads(ca, lambda p: context.load_verify_locations(cafile=p)):
        return ca, files["ca"][1], "holds no certificate OpenSSL reads"
    if "\n" not in str(cert) and not loads(cert, lambda p: context.load_verify_locations(p)):
        return cert, files["cert"][1], "holds no certificate OpenSSL reads"
    if key:
        return key, files["key"][1], "holds no private key of the certificate"
    return cert, files["cert"][1], "holds no private key for its certificate (or give --tls-key)"


@contextlib.contextmanager
def _dask_quiet() -> Iterator[None]:
    """Dask's loggers say nothing while tfcompress connects: what fails is said in one line.

    A port that answers as no scheduler does makes Dask's protocol code log a traceback
    (``Failed to deserialize``), and the stream it dropped a warning.
    """
    names = [name for name in logging.Logger.manager.loggerDict if name.startswith("distributed")]
    loggers = [logging.getLogger(name) for name in ["distributed", *names]]
    before = [logger.disabled for logger in loggers]
    for logger in loggers:
        logger.disabled = True
    try:
        yield
    finally:
        import gc

        gc.collect()  # a dropped stream's finalizer warns now, still silenced
        for logger, disabled in zip(loggers, before, strict=True):
            logger.disabled = disabled


class FrameTooLargeError(ValueError):
    """A Dask message announced more bytes than :data:`MAX_FRAME_BYTES`; nothing was reserved."""


def _bound_frames() -> None:
    """Dask's TCP and TLS reads refuse a frame over the bound of the context that reads.

    ``distributed.comm.tcp`` reads an 8-byte length, reserves that many bytes, then fills
    them; it has no option for a largest message. Its reader is wrapped once: without a bound
    in the reading context (:data:`_FRAME_LIMIT`: any Dask connection tfcompress did not open)
    it reads as before.
    """
    from distributed.comm import tcp

    read = tcp.read_bytes_rw
    if getattr(read, "tfcompress_bounded", False):
        return

    async def bounded(stream: Any, n: int) -> Any:
        limit = _FRAME_LIMIT.get()
        if limit is not None and n > limit:
            raise FrameTooLargeError(
                f"a message of {n:,} bytes was announced, more than the {limit:,} a scheduler "
                "sends a client"
            )
        return await read(stream, n)

    bounded.tfcompress_bounded = True  # type: ignore[attr-defined]
    tcp.read_bytes_rw = bounded


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
    except Exception as error:
        # The half-open comm Dask left in its frames is dropped now, while its loggers are
        # silenced (it warns "Closing dangling stream" when it goes).
        traceback.clear_frames(error.__traceback__)
        if isinstance(error, OSError | TimeoutError):
            raise _unreachable(address, timeout_s, error) from error
        if isinstance(error, UnicodeError):  # the resolver's: no DNS name is spelled so
            raise InvalidInputError(
                f"the host of '{shown_name(address)}' is not a name DNS can look up "
                f"({shown_name(error, 120)}); copy the address `dask scheduler` prints."
            ) from error
        # Anything else is what a server that is not a Dask scheduler made Dask's protocol
        # code raise (a huge frame, bytes msgpack cannot decode): a wrong address.
        reason = shown_name(" ".join(str(error).split()), 120) or type(error).__name__
        raise InvalidInputError(
            f"'{shown_name(address)}' answered, but not as a Dask scheduler "
            f"({type(error).__name__}: {reason}); check the port (`dask scheduler` prints its "
            "address, 8786 by default)."
        ) from error


def _unreachable(address: str, timeout_s: float, error: BaseException) -> InvalidInputError:
    reason = shown_name(" ".join(str(error).split())) or type(error).__name__
    return InvalidInputError(
        f"cannot reach the Dask scheduler at '{shown_name(address)}' within {timeout_s:g} s "
        f"({reason}); start it with `dask scheduler` and check the address, the firewall and, "
        "for tls://, the certificates."
    )
