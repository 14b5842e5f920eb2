"""Image folders: one subfolder per class, decoded and resized with TensorFlow's image ops."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from tfcompress._compat.tf import tensorflow
from tfcompress._files import check_regular_file, read_regular_bytes
from tfcompress._limits import MAX_IMAGE_PIXELS
from tfcompress.data.dataset import Dataset
from tfcompress.data.image_headers import read_header
from tfcompress.errors import InvalidDataError, InvalidInputError

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif"})


def load_image_folder(
    root: Path,
    *,
    image_size: tuple[int, int] | None = None,
    channels: int | None = None,
    rescale: float = 1.0 / 255.0,
) -> Dataset:
    """Read ``root/<class>/<image>`` files; labels are class indices in sorted folder order.

    Every image file is checked to be a regular file before it is opened, so a FIFO or a
    device named ``cat.png`` is refused instead of blocking forever, and the size its
    header declares is checked against ``TFCOMPRESS_MAX_IMAGE_PIXELS`` (100 million pixels
    by default) before it is decoded, so a decompression bomb is refused in one line.

    Raises:
        InvalidDataError: No class folders, no images, an unreadable folder, a special file
            (FIFO, device), a file that is no PNG/JPEG/GIF/BMP, an image over the pixel
            limit or an undecodable image.
        InvalidInputError: ``image_size``, ``channels`` or ``rescale`` out of range.
    """
    _check_options(image_size, channels, rescale)
    files = [
        (path, label)
        for label, folder in enumerate(
            p for p in _listing(root) if p.is_dir() and not p.name.startswith(".")
        )
        for path in _listing(folder)
        if path.suffix.lower() in IMAGE_SUFFIXES
    ]
    if not files:
        raise InvalidDataError(
            f"{root}: no images found; expected one subfolder per class holding "
            f"{'/'.join(sorted(IMAGE_SUFFIXES))} files."
        )
    x = decode_images(
        [path for path, _ in files], root, image_size=image_size, channels=channels, rescale=rescale
    )
    return Dataset(x, np.array([label for _, label in files], dtype=np.int64))


def decode_images(
    paths: list[Path],
    root: Path,
    *,
    image_size: tuple[int, int] | None = None,
    channels: int | None = None,
    rescale: float = 1.0 / 255.0,
) -> np.ndarray:
    """Decode image files (each checked first, as :func:`load_image_folder` says) to float32.

    Raises:
        InvalidDataError: A special file, no image, over the pixel limit, undecodable, or
            images of different sizes without ``image_size``.
    """
    _check_options(image_size, channels, rescale)
    for path in paths:
        # Refuse FIFOs and devices up front: before the slow TensorFlow import, not after.
        check_regular_file(path, error=InvalidDataError, what="an image file")
    tf = tensorflow()
    images = []
    limit = MAX_IMAGE_PIXELS.value()
    for path in paths:
        content = read_regular_bytes(path, error=InvalidDataError, what="an image file")
        _check_declared_size(path, content, limit)
        try:
            image = tf.io.decode_image(content, channels=channels or 0, expand_animations=False)
        except tf.errors.OpError as error:
            raise InvalidDataError(f"{path}: cannot decode the image; remove or fix it.") from error
        if image_size is not None:
            image = tf.image.resize(image, image_size)
        images.append(np.asarray(image, dtype=np.float32) * rescale)
    try:
        return np.stack(images)
    except ValueError as error:
        raise InvalidDataError(
            f"{root}: images differ in size or channels; pass image_size and channels."
        ) from error


def _check_declared_size(path: Path, content: bytes, limit: int) -> None:
    """Refuse an image whose header declares more pixels than ``limit``, before decoding."""
    try:
        header = read_header(content)
    except ValueError as error:
        raise InvalidDataError(
            f"{path}: cannot read the image's size ({error}); remove or fix it."
        ) from error
    if header is None:
        raise InvalidDataError(
            f"{path}: is not a PNG, JPEG, GIF or BMP image (its first bytes name none of "
            "them); remove it or convert it."
        )
    if header.pixels > limit:
        frames = f" x {header.frames} frames" if header.frames > 1 else ""
        raise InvalidDataError(
            f"{path}: the {header.format} declares {header.width}x{header.height}{frames} = "
            f"{header.pixels} pixels, over the limit of {limit} "
            f"({MAX_IMAGE_PIXELS.env}); it is a decompression bomb or needs resizing; "
            f"{MAX_IMAGE_PIXELS.hint()}."
        )


def _check_options(
    image_size: tuple[int, int] | None, channels: int | None, rescale: float
) -> None:
    if image_size is not None and not (
        isinstance(image_size, tuple | list)
        and len(image_size) == 2
        and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in image_size)
    ):
        raise InvalidInputError(
            f"image_size must be (height, width) in positive pixels, got {image_size!r}; "
            "pass e.g. (224, 224)."
        )
    if channels not in (None, 1, 3, 4):
        raise InvalidInputError(f"channels must be 1, 3 or 4, got {channels!r}; pass e.g. 3.")
    if not isinstance(rescale, int | float) or not math.isfinite(rescale):
        raise InvalidInputError(f"rescale must be a finite number, got {rescale!r}; e.g. 1/255.")


def _listing(folder: Path) -> list[Path]:
    """Sorted entries of ``folder``; an unreadable folder is a data error, not a traceback."""
    try:
        return sorted(folder.iterdir())
    except OSError as failure:
        raise InvalidDataError(
            f"{folder}: cannot list the folder ({failure.strerror}); check its permissions."
        ) from None
