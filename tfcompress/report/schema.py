"""The versioned benchmark report schema: what every JSON report holds, and a validator.

Bump :data:`SCHEMA_VERSION` on any change that breaks readers: its major part on removed or
renamed keys, its minor part on added keys.
"""

from __future__ import annotations

from typing import Any

from tfcompress.errors import InvalidInputError

SCHEMA = "tfcompress.benchmark"
# 2.0: the row key "peak_rss_mb" became "process_peak_rss_mb" (it always was the process's
# high-water mark, not one model's), rows gained "rss_growth_mb" (per-row memory), and
# environment.cpu_flags may be null (flags unknown) with environment.cpu_flags_source.
# 2.1: rows gained "samples_per_call", "calls", "latency_per_call_ms" and
# "latency_per_sample_ms" (a static-batch file's row is timed at whole calls of its batch),
# and "speedup" compares medians per sample.
# 2.2: rows gained "device" (the Dask worker a row ran on with --on; null: a local run) and
# the report gained "devices" (each worker's environment, read there).
# 2.3: the report gained "config" (the BenchmarkConfig it measured with; null when the
# result was built by hand), which BenchmarkConfig.from_dict reads back.
# 2.4: rows gained "op_profile" (benchmark --profile-ops: each op's time, share and
# placement, each delegated partition's time, and the sum's check; null without it), and
# rows' "throughput_per_s" is batch / the median latency, the statistic of
# "latency_per_sample_ms" (it was batch / the mean; the mean stays in "latency_ms").
SCHEMA_VERSION = "2.4"

#: Keys of the top-level report object.
REPORT_KEYS = (
    "schema",
    "schema_version",
    "environment",
    "settings",
    "metric",
    "samples",
    "reference",
    "notes",
    "rows",
    "devices",
    "config",
)
#: Keys of every row (values are null when not measured; ``status`` says why).
ROW_KEYS = (
    "artifact",
    "backend",
    "threads",
    "batch",
    "status",
    "size_bytes",
    "gzip_bytes",
    "params",
    "macs",
    "ops",
    "precision",
    "delegated_ops",
    "init_ms",
    "first_inference_ms",
    "latency_ms",
    "samples_per_call",
    "calls",
    "latency_per_call_ms",
    "latency_per_sample_ms",
    "throughput_per_s",
    "accuracy",
    "rss_growth_mb",
    "process_peak_rss_mb",
    "size_ratio",
    "speedup",
    "backend_details",
    "device",
    "op_profile",
)
LATENCY_KEYS = ("runs", "mean", "std", "min", "p50", "p90", "p99", "max")
#: Keys (of rows or of the report) a report older than the version lacks: a reader of 2.x
#: takes it without them.
KEYS_SINCE = {
    "2.0": (),
    "2.1": ("samples_per_call", "calls", "latency_per_call_ms", "latency_per_sample_ms"),
    "2.2": ("device", "devices"),
    "2.3": ("config",),
    "2.4": ("op_profile",),
}


def validate_report(report: dict[str, Any]) -> dict[str, Any]:
    """Check that ``report`` is a benchmark report this version of tfcompress can read.

    Raises:
        InvalidInputError: Another schema, a newer major version, or missing keys.
    """
    if report.get("schema") != SCHEMA:
        raise InvalidInputError(
            f"not a tfcompress benchmark report (schema {report.get('schema')!r}); "
            "pass a file written by `tfcompress benchmark --report`."
        )
    major = str(report.get("schema_version", "0")).split(".")[0]
    if major != SCHEMA_VERSION.split(".")[0]:
        raise InvalidInputError(
            f"report schema version {report.get('schema_version')} is not readable by this "
            f"tfcompress (reads {SCHEMA_VERSION}); upgrade tfcompress."
        )
    version = str(report.get("schema_version"))
    known = list(KEYS_SINCE)
    # A known older minor lacks the keys of every later one (an unknown one: none missing).
    later = known[known.index(version) + 1 :] if version in known else []
    newer = {key for since in later for key in KEYS_SINCE[since]}
    missing = [k for k in REPORT_KEYS if k not in report and k not in newer]
    expected = tuple(k for k in ROW_KEYS if k not in newer)
    for index, row in enumerate(report.get("rows", [])):
        missing += [f"rows[{index}].{k}" for k in expected if k not in row]
        latency = row.get("latency_ms")
        if latency is not None:
            missing += [f"rows[{index}].latency_ms.{k}" for k in LATENCY_KEYS if k not in latency]
    if missing:
        raise InvalidInputError(f"benchmark report lacks keys: {', '.join(missing[:10])}.")
    return report
