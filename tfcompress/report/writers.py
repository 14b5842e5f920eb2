"""Write a benchmark result as JSON, CSV, Markdown and PNG plots, each atomically."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfcompress._files import (
    check_output_path,
    check_writable_folder,
    write_bytes_atomic,
)
from tfcompress.errors import InvalidInputError, OutputExistsError, OutputLocationError
from tfcompress.report.schema import LATENCY_KEYS, ROW_KEYS

if TYPE_CHECKING:
    from tfcompress.bench.result import BenchmarkResult

logger = logging.getLogger(__name__)

FORMATS = ("json", "csv", "md", "png")
STEM = "benchmark"
#: Every plot :func:`tfcompress.report.plots.plot_all` can draw (one PNG each, when it has
#: data). The existence check covers them all: a stale plot of another run must not sit
#: unnoticed beside a new report. A test keeps this list equal to what plot_all draws.
PLOTS = ("accuracy_latency", "size", "batch")


def report_paths(directory: Path, formats: Sequence[str] = FORMATS) -> list[Path]:
    """Every file a report in ``formats`` may write into ``directory``."""
    paths = [directory / f"{STEM}.{kind}" for kind in ("json", "csv", "md") if kind in formats]
    if "png" in formats:
        paths += [directory / f"{STEM}_{name}.png" for name in PLOTS]
    return paths


def write_report(
    result: BenchmarkResult,
    directory: str | os.PathLike[str],
    *,
    formats: Sequence[str] = FORMATS,
    overwrite: bool = False,
) -> list[Path]:
    """Write ``benchmark.json``, ``benchmark.csv``, ``benchmark.md`` and plots into ``directory``.

    Like every tfcompress output, existing files are replaced only with ``overwrite`` (see
    :func:`report_paths`); all of them are checked before the first is written, so a refusal
    leaves no half report. ``directory`` is created when missing; ``formats`` is a subset of
    ``json``, ``csv``, ``md``, ``png``. Returns the files written.

    Raises:
        InvalidInputError: Unknown format.
        OutputExistsError: ``directory`` is a file, or holds report files and ``overwrite``
            is False.
        OutputLocationError: The folder cannot be created or written.
        MissingDependencyError: ``png`` without matplotlib.

    Example:
        >>> write_report(result, Path("reports"), formats=("json", "md"))  # doctest: +SKIP
        [PosixPath('reports/benchmark.json'), PosixPath('reports/benchmark.md')]
    """
    directory = check_report_dir(directory, overwrite=overwrite, formats=formats)
    if "png" in formats:  # first: a missing matplotlib fails before anything is written
        from tfcompress.report.plots import plot_all

        plots = plot_all(result)
    contents: dict[Path, str | bytes] = {}
    if "json" in formats:
        text = json.dumps(result.to_dict(), indent=2, default=str) + "\n"
        contents[directory / f"{STEM}.json"] = text
    if "csv" in formats:
        contents[directory / f"{STEM}.csv"] = to_csv(result)
    if "md" in formats:
        contents[directory / f"{STEM}.md"] = to_markdown(result)
    if "png" in formats:
        for name, data in plots.items():
            contents[directory / f"{STEM}_{name}.png"] = data
    written = write_together(directory, contents, overwrite=overwrite)
    logger.info("wrote %s", ", ".join(str(p) for p in written))
    return written


def check_report_dir(
    directory: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    formats: Sequence[str] = FORMATS,
) -> Path:
    """Fail now, before a long benchmark, when reports could not be written into ``directory``.

    Nothing is created: a missing folder's nearest existing ancestor must accept new files.
    In an existing folder, every file the report may write (:func:`report_paths`) must be
    absent, unless ``overwrite``; a folder or special file in their place is refused even
    then. Raises InvalidInputError for an unknown format, else as :func:`check_report_folder`.
    """
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise InvalidInputError(f"unknown report format(s) {unknown}; choose from {FORMATS}.")
    directory = Path(directory)
    return check_report_folder(directory, report_paths(directory, formats), overwrite=overwrite)


def check_report_folder(
    directory: str | os.PathLike[str], files: Sequence[Path], *, overwrite: bool
) -> Path:
    """The checks of :func:`check_report_dir` for any report's own file names.

    Every report (benchmark, compress, selection) refuses the same things before its work
    starts: a file where the folder should be, any of ``files`` already there without
    ``overwrite`` (a folder or special file in their place even with it), and a folder that
    cannot be created or written (``files``: every file the report may write into it;
    ``overwrite``: ``--force``). Returns ``directory`` as a :class:`~pathlib.Path`.

    Raises:
        OutputExistsError: ``directory`` is a file, or report files exist without
            ``overwrite``.
        OutputLocationError: The folder (or where it would be created) is not writable.
    """
    directory = Path(directory)
    # os.path's tests, not Path's: they answer False for a name too long to stat.
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise OutputExistsError(f"{directory}: is a file; give a folder for the reports.")
    if os.path.isdir(directory):
        _check_report_files(directory, files, overwrite)
    existing, missing = directory, []
    while not os.path.exists(existing) and existing != existing.parent:
        if os.path.islink(existing):  # a dangling link: mkdir would fail on it later
            raise OutputLocationError(
                f"{existing}: is a symbolic link to a missing folder; remove the link or "
                "point it at a folder for the reports."
            )
        missing.append(existing.name)
        existing = existing.parent
    if not os.path.isdir(existing):
        raise OutputLocationError(
            f"{directory}: cannot create the report folder under {existing}, which is a file."
        )
    _check_names(existing, [*missing, *(f.name for f in files)], directory)
    check_writable_folder(existing, what=directory)
    return directory


def _check_names(folder: Path, names: Sequence[str], directory: Path) -> None:
    """Refuse folder and file names longer than the file system takes, before any work."""
    try:
        limit = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    for name in names:
        if len(os.fsencode(name)) > limit:
            raise OutputLocationError(
                f"{directory}: the name {name[:40]}... is longer than this file system "
                f"allows ({limit} bytes); choose a shorter report folder."
            )


@contextlib.contextmanager
def report_files(directory: Path, files: Sequence[Path]) -> Iterator[list[Path]]:
    """Create the report folder; if the block fails, take back what it wrote.

    The block appends each file it writes to the yielded list. On any failure the files
    that did not exist before are removed, and so are the folders this call created:
    a report is written whole or not at all (a file replaced with ``overwrite`` stays
    replaced: its old content was given up when the user asked for ``--force``).

    Raises:
        OutputLocationError: The folder cannot be created.
    """
    existed = {path for path in files if os.path.lexists(path)}
    created = []
    folder = directory
    while not os.path.exists(folder) and folder != folder.parent:
        created.append(folder)
        folder = folder.parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as failure:
        raise OutputLocationError(
            f"{directory}: cannot create the report folder ({failure.strerror}); choose "
            "another folder."
        ) from None
    written: list[Path] = []
    try:
        yield written
    except BaseException:
        # Every report file that was not there before, listed or not: a signal between a
        # file's rename and its append to ``written`` must not leave that file behind.
        for path in {*written, *files}:
            if path not in existed:
                path.unlink(missing_ok=True)
        for made in created:  # innermost first
            with contextlib.suppress(OSError):
                made.rmdir()
        raise


def write_together(
    directory: Path, contents: Mapping[Path, str | bytes], *, overwrite: bool = False
) -> list[Path]:
    """Write a report's files together: staged in a hidden folder, then renamed into place.

    Every file's bytes are on disk (in ``directory/.tfcompress-report-*``, on the same file
    system) before the first one takes its name; the renames follow one another, and a
    failure or a signal at any point takes back every report file that was not there before
    (:func:`report_files`). A report never shows a file without its companions, nor names
    an artifact that was not written. ``contents``: final path -> text or bytes, in order.
    Without ``overwrite``, a file that appeared since the up-front check is never replaced
    (the rename is a hard link that fails). Returns the paths written.

    Raises:
        OutputExistsError: A report file exists and ``overwrite`` is False.
        OutputLocationError: The folder cannot be created or written.
    """
    with report_files(directory, list(contents)) as written:
        try:
            staging = Path(tempfile.mkdtemp(prefix=".tfcompress-report-", dir=directory))
        except OSError as failure:
            raise OutputLocationError(
                f"{directory}: cannot write the report there ({failure.strerror}); choose "
                "another folder."
            ) from None
        try:
            encoded = {p: d.encode() if isinstance(d, str) else d for p, d in contents.items()}
            staged = [(p, write_bytes_atomic(staging / p.name, d)) for p, d in encoded.items()]
            for path, file in staged:
                _publish(file, path, overwrite)
                written.append(path)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return written


def _publish(staged: Path, path: Path, overwrite: bool) -> None:
    """Give ``staged`` its final name (never a special file; no clobbering without overwrite)."""
    check_output_path(path, overwrite=overwrite)
    if overwrite:
        os.replace(staged, path)
        return
    try:
        os.link(staged, path)  # fails if the name appeared since the check
    except FileExistsError:
        raise OutputExistsError(
            f"{path}: appeared while the report was written; pass --force (overwrite=True) "
            "to replace it, or choose another folder."
        ) from None
    except OSError:  # a file system without hard links: the check above is all there is
        os.replace(staged, path)


def _check_report_files(directory: Path, paths: Sequence[Path], overwrite: bool) -> None:
    existing = [p for p in paths if os.path.lexists(p)]  # a dangling symlink counts too
    if existing and not overwrite:
        names = ", ".join(p.name for p in existing)
        raise OutputExistsError(
            f"{directory}: already holds {names}; pass --force (overwrite=True) to replace "
            "the report, or choose another folder."
        )
    for path in existing:
        # With overwrite, what stands there must still be a file: the same rules as every
        # other output (never a directory, pipe or device).
        check_output_path(path, overwrite=True)


def csv_columns() -> list[str]:
    """CSV header: the row keys with ``latency_ms`` flattened to ``latency_<stat>_ms``."""
    columns: list[str] = []
    for key in ROW_KEYS:
        if key == "latency_ms":
            columns += [_latency_column(k) for k in LATENCY_KEYS]
        elif key not in ("backend_details", "op_profile"):  # nested: left to the JSON
            columns.append(key)
    return columns


def _latency_column(key: str) -> str:
    return "latency_runs" if key == "runs" else f"latency_{key}_ms"


def to_csv(result: BenchmarkResult) -> str:
    """One CSV line per row (latency flattened; backend details left to the JSON)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=csv_columns(), lineterminator="\n")
    writer.writeheader()
    for row in result.to_dict()["rows"]:
        flat: dict[str, Any] = {k: v for k, v in row.items() if k in writer.fieldnames}
        latency = row.get("latency_ms") or {}
        writer.writerow({**flat, **{_latency_column(k): latency.get(k) for k in LATENCY_KEYS}})
    return buffer.getvalue()


def to_markdown(result: BenchmarkResult, *, heading: str = "Benchmark") -> str:
    """A Markdown page: the table, the notes, the environment and the method."""
    env = result.environment
    settings = result.settings
    lines = [
        f"# {heading}",
        "",
        result.table(markdown=True),
        "",
        f"Latency is per run of `batch` samples (one call, or calls of a file's static "
        f"batch: the status says how many); `ms/sample` is the median per sample; `x ref` is "
        f"the speed-up per sample over `{result.reference}` at the same threads (and batch, "
        "or the batch that was asked of a static-batch file).",
    ]
    if result.samples:
        lines.append(f"{result.metric} on {result.samples} labelled samples.")
    if result.notes:
        lines += ["", "## Findings", "", *(f"- {note}" for note in result.notes)]
    lines += ["", "## Environment", "", "```", str(env), "```"]
    if result.devices:  # benchmark --on: where each row ran, each device as read there
        lines += ["", "## Devices", "", result.side_by_side(markdown=True), "", "```"]
        lines += [*(str(device) for device in result.devices), "```"]
    lines += [
        "",
        "## Method",
        "",
        f"First call timed alone; then at least {settings.get('warmup_runs')} warm-up runs "
        f"and {settings.get('warmup_seconds')} s; then at least {settings.get('runs')} timed "
        f"runs and {settings.get('min_seconds')} s (LiteRT benchmark_model's method). "
        "Std is the population standard deviation; percentiles interpolate linearly.",
        "",
    ]
    return "\n".join(lines)
