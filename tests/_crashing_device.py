"""A Dask worker preload (``dask worker --preload``): a device whose runtime crashes.

Every candidate a gate sends it runs in a real child of that worker which dies by SIGABRT
(as LiteRT aborts on some int8 files), so the device answers with the crash, as one would.
"""

from __future__ import annotations

from typing import Any


def dask_setup(worker: Any) -> None:
    from tfcompress.bench import _on_device

    def crashes(*_: Any, **__: Any) -> Any:
        from tfcompress._child import call

        return call("os:abort", what="the candidate on this device", warm=False)

    _on_device.run_model = crashes
