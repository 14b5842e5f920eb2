"""``tfcompress data``: the calib/test/train ``.npz`` files from what users have.

Sources: a folder of images or ``.wav`` clips (one subfolder per class: labelled, in sorted
folder order; files directly in the folder: unlabelled), a ``.npy`` array, a ``.csv`` table
(one sample per row; a column named ``label`` or ``y``, or ``label_column``, holds the labels)
or an ``.npz`` with ``x`` (and ``y``). With a model, every sample is fitted to its one input:
images decoded at its height, width and channels, clips cut or padded to its length, arrays
reshaped to its sample shape, all cast to its dtype.

Scaling (``scale``), the rule:

* ``"auto"`` (default): images to [0, 1] (pixels / 255), or left 0..255 when the Keras
  model's first layer is a ``Rescaling`` (it scales them itself) or its input is an integer
  type; audio stays in [-1, 1] (PCM full scale); arrays and CSV values are taken as they are.
* ``"0,1"`` or ``"-1,1"``: mapped linearly onto that range from the source's own range
  (0..255 for images, -1..1 for audio, the data's minimum..maximum for arrays).
* ``"none"``: as read (images 0..255, audio -1..1).

The split is stratified by label (unlabelled: uniform) and fixed by ``seed``: ``test.npz``
holds ``test_fraction`` of each class, ``train.npz`` the rest, and ``calib.npz`` the first
``calib_samples`` of the shuffled training samples, without labels (calibration needs none).
"""

from __future__ import annotations

import csv
import io
import math
import wave
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tfcompress._files import check_output_path, check_regular_file, read_regular_bytes
from tfcompress.data.images import IMAGE_SUFFIXES, _listing, decode_images
from tfcompress.data.npfiles import read_npy, read_npz, write_npz
from tfcompress.data.validation import check_count
from tfcompress.errors import InvalidDataError, InvalidInputError

SPLIT_FILES = ("calib.npz", "test.npz", "train.npz")
SCALES = ("auto", "0,1", "-1,1", "none")
_LABEL_COLUMNS = ("label", "y")
_NOUNS = {"images": "images", "audio": "clips", "arrays": "samples"}
# Clips become mono float32 in [-1, 1] (8-bit PCM is unsigned, the others signed, as the WAV
# format says), resampled with SciPy's polyphase filter (anti-aliased) when SciPy is there
# (the ``data`` extra), else linearly, then cut or zero-padded at their end to one length.
AUDIO_SUFFIXES = frozenset({".wav"})
_FULL_SCALE = {1: 128.0, 2: 32768.0, 3: 8388608.0, 4: 2147483648.0}


@dataclass(frozen=True)
class PreparedData:
    """What :func:`prepare_data` wrote, and how it read and scaled the samples."""

    source: str
    kind: str  # "images", "audio" or "arrays"
    written: tuple[Path, ...]
    counts: Mapping[str, int]  # samples per file name
    classes: tuple[str, ...]  # class names in label order; () when unlabelled
    sample_shape: tuple[int, ...]
    dtype: str
    value_range: tuple[float, float]
    scaling: str  # the rule applied, in words
    seed: int
    per_class: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # (train, test)
    labelled: bool = False  # whether test.npz and train.npz hold y

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``."""
        return {
            "source": self.source,
            "kind": self.kind,
            "written": [str(path) for path in self.written],
            "counts": dict(self.counts),
            "classes": list(self.classes),
            "per_class": {name: list(pair) for name, pair in self.per_class.items()},
            "sample_shape": list(self.sample_shape),
            "dtype": self.dtype,
            "value_range": list(self.value_range),
            "scaling": self.scaling,
            "seed": self.seed,
            "labelled": self.labelled,
        }

    def __str__(self) -> str:
        low, high = self.value_range
        kept = "kept as given, not classes" if self.labelled else "none"
        lines = [
            f"{self.source}: {sum(self.counts[n] for n in ('test.npz', 'train.npz'))} "
            f"{_NOUNS[self.kind]}, each {self.sample_shape} {self.dtype} in "
            f"[{low:.4g}, {high:.4g}] ({self.scaling})",
            "labels: " + (", ".join(f"{i}={name}" for i, name in enumerate(self.classes)) or kept),
        ]
        if self.per_class:
            lines.append(
                "per class (train/test): "
                + ", ".join(f"{n} {a}/{b}" for n, (a, b) in self.per_class.items())
            )
        lines += [f"wrote {path} ({self.counts[path.name]} samples)" for path in self.written]
        lines.append(f"split seed {self.seed}: the same seed writes the same files")
        return "\n".join(lines)


def prepare_data(
    source: str | Path,
    *,
    model: Any = None,
    out_dir: str | Path = ".",
    test_fraction: float = 0.25,
    calib_samples: int = 500,
    seed: int = 0,
    scale: str = "auto",
    sample_rate: int = 16000,
    label_column: str | None = None,
    overwrite: bool = False,
) -> PreparedData:
    """Write ``calib.npz``, ``test.npz`` and ``train.npz`` from images, audio or arrays.

    Args:
        source: An image or ``.wav`` folder (class subfolders, or files directly in it),
            a ``.npy``, ``.csv`` or ``.npz`` file.
        model: A model (path or loaded) whose single input the samples are fitted to.
        out_dir: Where the three files go (created if missing).
        test_fraction: Share of each class held out in ``test.npz``, inside (0, 1).
        calib_samples: Samples in ``calib.npz`` (at most the training samples).
        seed: Fixes the split: the same seed writes the same files.
        scale: ``"auto"``, ``"0,1"``, ``"-1,1"`` or ``"none"`` (the module docstring).
        sample_rate: Rate clips are resampled to, in Hz.
        label_column: The CSV column of labels (default ``label`` or ``y`` if present).
        overwrite: Replace existing split files.

    Returns:
        What was written, with counts, classes, shape, dtype and value range.

    Raises:
        InvalidInputError: An option out of range.
        InvalidDataError: An unreadable source, samples that do not fit the model, or too
            few samples for a test and a training split.
        OutputExistsError: A split file exists without ``overwrite`` (nothing is written).

    Example:
        >>> print(prepare_data("photos/", model="model.keras"))  # doctest: +SKIP
    """
    _check_options(test_fraction, calib_samples, seed, scale, sample_rate)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [check_output_path(out / name, overwrite=overwrite) for name in SPLIT_FILES]
    spec, rescaling = _model_input(model)
    kind, x, y, classes, source_range = _read(Path(source), spec, sample_rate, label_column)
    x, scaling = _scaled(x, kind, scale, source_range, spec, rescaling)
    if spec is not None:
        x = _fitted(x, spec, Path(source))
    train, test = _split(len(x), y if classes else None, test_fraction, seed)
    arrays = {
        "calib.npz": {"x": x[train[:calib_samples]]},
        "test.npz": {"x": x[test]} if y is None else {"x": x[test], "y": y[test]},
        "train.npz": {"x": x[train]} if y is None else {"x": x[train], "y": y[train]},
    }
    written = tuple(write_npz(p, arrays[p.name], overwrite=overwrite) for p in paths)
    per_class = {}
    if classes:
        per_class = {
            name: (int(np.sum(y[train] == i)), int(np.sum(y[test] == i)))
            for i, name in enumerate(classes)
        }
    return PreparedData(
        source=str(source),
        kind=kind,
        written=written,
        counts={name: len(a["x"]) for name, a in arrays.items()},
        classes=classes,
        sample_shape=tuple(int(d) for d in x.shape[1:]),
        dtype=str(x.dtype),
        value_range=(float(x.min()), float(x.max())) if x.size else (0.0, 0.0),
        scaling=scaling,
        seed=seed,
        per_class=per_class,
        labelled=y is not None,
    )


def _check_options(
    test_fraction: float, calib_samples: int, seed: int, scale: str, sample_rate: int
) -> None:
    if not isinstance(test_fraction, int | float) or not 0 < test_fraction < 1:
        raise InvalidInputError(
            f"test_fraction must be inside (0, 1), got {test_fraction!r}; e.g. 0.25."
        )
    check_count(calib_samples, "calib_samples", "e.g. 500")
    check_count(sample_rate, "sample_rate", "e.g. 16000")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InvalidInputError(f"seed must be a non-negative integer, got {seed!r}; e.g. 0.")
    if scale not in SCALES:
        raise InvalidInputError(f"scale must be one of {', '.join(SCALES)}, got {scale!r}.")


def _model_input(model: Any) -> tuple[Any, bool]:
    """The model's one input spec (None without a model) and whether it rescales itself."""
    if model is None:
        return None, False
    from tfcompress.models import load_model, model_name
    from tfcompress.models.signature import input_spec, model_signature

    loaded = load_model(model) if isinstance(model, str | Path) else model
    names = model_signature(loaded).input_names
    if len(names) != 1:  # what this command writes (one x) cannot feed it
        raise InvalidDataError(
            f"{model_name(loaded)} has {len(names)} inputs ({', '.join(names)}), and "
            "`tfcompress data` fits samples to one input: save an .npz with one array per "
            "input name yourself (labels as y or y_<output>), or drop --model."
        )
    layers = [
        type(layer).__name__
        for layer in getattr(loaded, "layers", [])[:3]
        if type(layer).__name__ != "InputLayer"
    ]
    return input_spec(loaded), bool(layers) and layers[0] == "Rescaling"


def _read(
    source: Path, spec: Any, sample_rate: int, label_column: str | None
) -> tuple[str, np.ndarray, np.ndarray | None, tuple[str, ...], tuple[float, float] | None]:
    """``(kind, x, y, class names, the source's own value range)``."""
    if source.is_dir():
        return _read_folder(source, spec, sample_rate)
    suffix = source.suffix.lower()
    if suffix == ".npy":
        return "arrays", read_npy(source), None, (), None
    if suffix == ".npz":
        arrays = read_npz(source)
        if "x" not in arrays:
            raise InvalidDataError(f"{source}: no array 'x'; save the samples as x (labels y).")
        y = arrays.get("y")
        return "arrays", arrays["x"], *_labels(y, source)
    if suffix == ".csv":
        x, y = _read_csv(source, label_column)
        return "arrays", x, *_labels(y, source)
    if not source.exists():
        raise InvalidDataError(f"{source}: no such file or folder; check the path.")
    raise InvalidDataError(
        f"{source}: cannot make data from a {suffix or 'file without suffix'}; pass an image "
        "or .wav folder, a .npy, .csv or .npz file."
    )


def _labels(y: Any, source: Path) -> tuple[np.ndarray | None, tuple[str, ...], None]:
    """Class labels as indices with their names, or other labels kept as given.

    Regression targets and one-hot rows get no class names: they are split unstratified.
    """
    if y is None:
        return None, (), None
    y = np.asarray(y)
    if y.ndim != 1 or len(y) == 0:
        return y, (), None
    if np.issubdtype(y.dtype, np.number):
        values = np.unique(y)
        if not (np.all(values == np.round(values)) and values.min() >= 0):
            return y, (), None  # not class numbers: regression targets
        return y.astype(np.int64), tuple(str(i) for i in range(int(values.max()) + 1)), None
    names, indices = np.unique(y.astype(str), return_inverse=True)
    return indices.astype(np.int64), tuple(str(n) for n in names), None


def _read_folder(
    root: Path, spec: Any, sample_rate: int
) -> tuple[str, np.ndarray, np.ndarray | None, tuple[str, ...], tuple[float, float]]:
    entries = _listing(root)
    folders = [p for p in entries if p.is_dir() and not p.name.startswith(".")]
    groups = [(f.name, _listing(f)) for f in folders] if folders else [("", entries)]
    suffixes = {p.suffix.lower() for _, files in groups for p in files}
    kind = "audio" if suffixes & AUDIO_SUFFIXES and not suffixes & IMAGE_SUFFIXES else "images"
    wanted = AUDIO_SUFFIXES if kind == "audio" else IMAGE_SUFFIXES
    files = [
        (p, label)
        for label, (_, ps) in enumerate(groups)
        for p in ps
        if p.suffix.lower() in wanted and not p.name.startswith(".")
    ]
    if not files:
        raise InvalidDataError(
            f"{root}: no images ({'/'.join(sorted(IMAGE_SUFFIXES))}) or .wav clips found, "
            "in the folder or in one subfolder per class."
        )
    y = np.array([label for _, label in files], np.int64) if folders else None
    classes = tuple(name for name, _ in groups) if folders else ()
    paths = [p for p, _ in files]
    if kind == "audio":
        return "audio", _clips(paths, spec, sample_rate), y, classes, (-1.0, 1.0)
    size, channels = None, None
    if spec is not None and len(spec.sample_shape) == 3:
        height, width, depth = spec.sample_shape
        size = (height, width) if height and width else None
        channels = depth if depth in (1, 3, 4) else None
    x = decode_images(paths, root, image_size=size, channels=channels, rescale=1.0)
    return "images", x, y, classes, (0.0, 255.0)


def _clips(paths: list[Path], spec: Any, sample_rate: int) -> np.ndarray:
    for path in paths:
        check_regular_file(path, error=InvalidDataError, what="an audio file")
    clips = [read_wav(path, sample_rate=sample_rate) for path in paths]
    length = spec.sample_shape[0] if spec is not None and spec.sample_shape else None
    length = int(length) if length else max(len(clip) for clip in clips)
    fitted = [np.pad(clip[:length], (0, max(0, length - len(clip)))) for clip in clips]
    return np.stack(fitted).astype(np.float32)  # each cut to length, or zero-padded at its end


def _read_csv(path: Path, label_column: str | None) -> tuple[np.ndarray, np.ndarray | None]:
    text = read_regular_bytes(path, error=InvalidDataError, what="a CSV file").decode(
        "utf-8-sig", errors="replace"
    )
    rows = [row for row in csv.reader(io.StringIO(text)) if row]
    if not rows:
        raise InvalidDataError(f"{path}: no rows; one sample per row, comma-separated.")
    header = None if all(_is_number(cell) for cell in rows[0]) else rows.pop(0)
    wanted = label_column or next((c for c in _LABEL_COLUMNS if header and c in header), None)
    if wanted is not None and (header is None or wanted not in header):
        raise InvalidInputError(
            f"{path}: no column {wanted!r} (columns: {', '.join(header or ['no header'])}); "
            "pass the label column's name."
        )
    column = header.index(wanted) if header and wanted else None
    try:
        table = [[float(v) for i, v in enumerate(r) if i != column] for r in rows]
        x = np.array(table, np.float32)
    except ValueError as error:
        raise InvalidDataError(
            f"{path}: a value is not a number or a row has another length ({error}); "
            "every feature column must be numeric."
        ) from None
    if column is None:
        return x, None
    labels = np.array([row[column] for row in rows])
    numeric = all(_is_number(v) for v in labels)
    return x, labels.astype(np.float64) if numeric else labels


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _scaled(
    x: np.ndarray,
    kind: str,
    scale: str,
    source_range: tuple[float, float] | None,
    spec: Any,
    rescaling: bool,
) -> tuple[np.ndarray, str]:
    x = np.asarray(x)
    integer_input = spec is not None and np.issubdtype(np.dtype(spec.dtype), np.integer)
    if scale == "auto":
        if kind != "images":
            return x, "as read" if kind == "arrays" else "PCM full scale, [-1, 1]"
        if rescaling or integer_input:
            why = "the model's Rescaling layer scales them" if rescaling else "integer input"
            return x, f"pixels 0..255: {why}"
        scale = "0,1"
    if scale == "none":
        return x, "as read"
    low, high = (0.0, 1.0) if scale == "0,1" else (-1.0, 1.0)
    start, stop = source_range or (float(np.min(x)), float(np.max(x)))
    if stop <= start:
        raise InvalidDataError(
            f"every value is {start:g}: nothing to scale to [{low:g}, {high:g}]; pass scale 'none'."
        )
    scaled = (x.astype(np.float32) - start) / (stop - start) * (high - low) + low
    return scaled.astype(np.float32), f"{start:g}..{stop:g} mapped to [{low:g}, {high:g}]"


def _fitted(x: np.ndarray, spec: Any, source: Path) -> np.ndarray:
    """``x`` reshaped to the model's sample shape (a trailing 1 added) and cast to its dtype."""
    shape = tuple(spec.sample_shape)
    if x.ndim == len(shape) and shape[-1] == 1:  # (N, 16000) for (16000, 1): add the channel
        x = x[..., np.newaxis]
    fits = x.ndim - 1 == len(shape) and all(
        d in (None, a) for d, a in zip(shape, x.shape[1:], strict=True)
    )
    if not fits:
        if None in shape or int(np.prod(x.shape[1:])) != int(np.prod(shape)):
            raise InvalidDataError(
                f"{source}: each sample has shape {x.shape[1:]}, but the model's input "
                f"{spec.name!r} takes {shape}; pass data "
                "with that many values per sample (or another model)."
            )
        x = x.reshape(len(x), *shape)
    dtype = np.dtype(spec.dtype)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return np.clip(np.round(x), info.min, info.max).astype(dtype)
    return x.astype(dtype)


def _split(
    count: int, y: np.ndarray | None, test_fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Shuffled train and test indices: ``test_fraction`` of each class in test."""
    rng = np.random.default_rng(seed)
    groups = [np.arange(count)] if y is None else [np.flatnonzero(y == c) for c in np.unique(y)]
    train, test = [], []
    for members in groups:
        members = rng.permutation(members)
        held = round(len(members) * test_fraction)
        held = min(max(held, 1), len(members) - 1) if len(members) > 1 else 0
        test.append(members[:held])
        train.append(members[held:])
    train_at, test_at = np.concatenate(train), np.concatenate(test)
    if not len(train_at) or not len(test_at):
        raise InvalidDataError(
            f"{count} sample(s) cannot make a test and a training split; give at least 2 "
            "(one per split), and more per class for a useful test."
        )
    return rng.permutation(train_at), rng.permutation(test_at)


def read_wav(path: Path, *, sample_rate: int) -> np.ndarray:
    """One mono float32 clip in [-1, 1] at ``sample_rate``.

    Raises:
        InvalidDataError: Not a readable PCM WAV file (float or compressed WAV included:
            convert those to 16-bit PCM), or a special file.
    """
    content = read_regular_bytes(path, error=InvalidDataError, what="an audio file")
    try:
        with wave.open(io.BytesIO(content)) as clip:
            channels, width, rate = clip.getnchannels(), clip.getsampwidth(), clip.getframerate()
            frames = clip.readframes(clip.getnframes())
    except (wave.Error, EOFError) as error:
        raise InvalidDataError(
            f"{path}: not a PCM WAV file ({error}); convert it to 16-bit PCM, e.g. "
            "`ffmpeg -i IN -acodec pcm_s16le OUT.wav`."
        ) from error
    if width not in _FULL_SCALE or channels < 1 or rate < 1:
        raise InvalidDataError(f"{path}: {width}-byte samples are not PCM; convert to 16-bit.")
    if width == 3:  # 24-bit: widen each little-endian triple to int32
        raw = np.frombuffer(frames[: len(frames) // 3 * 3], np.uint8).reshape(-1, 3)
        values = raw[:, 0].astype(np.int32) | raw[:, 1] << 8 | raw[:, 2].astype(np.int8) << 16
    else:
        dtype = {1: np.uint8, 2: "<i2", 4: "<i4"}[width]
        values = np.frombuffer(frames[: len(frames) // width * width], dtype)
    samples = values.astype(np.float64)
    if width == 1:
        samples -= 128.0  # 8-bit WAV is unsigned
    samples = samples[: len(samples) // channels * channels].reshape(-1, channels).mean(axis=1)
    return _resampled(samples / _FULL_SCALE[width], rate, sample_rate).astype(np.float32)


def _resampled(samples: np.ndarray, rate: int, target: int) -> np.ndarray:
    if rate == target or not len(samples):
        return samples
    try:
        from scipy.signal import resample_poly
    except ImportError:  # the device install: linear interpolation
        count = max(1, round(len(samples) * target / rate))
        return np.interp(np.arange(count) * rate / target, np.arange(len(samples)), samples)
    common = math.gcd(rate, target)
    return resample_poly(samples, target // common, rate // common)
