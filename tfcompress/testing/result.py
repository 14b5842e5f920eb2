"""The gate report's names where they used to live: see :mod:`tfcompress.testing.report`.

``GateResult``, the name of the single-output gate's report before every gate returned a
:class:`~tfcompress.testing.report.GateReport`, stays an alias of it.
"""

from __future__ import annotations

from tfcompress.testing.report import ClassChange, GateReport, Verdict

#: The single-output gate's report used to be its own class; it is the :class:`GateReport`
#: every gate returns now (``report.drop``, ``report.per_class``... read its one verdict).
GateResult = GateReport

__all__ = ["ClassChange", "GateReport", "GateResult", "Verdict"]
