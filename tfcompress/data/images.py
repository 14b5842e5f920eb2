"""Image folders: one subfolder per class, decoded and resized with TensorFlow's image ops."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tfcompress._compat.tf import tensorflow
from tfcompress.data.dataset import Dataset
from tfcompress.errors import InvalidDataError

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif"})


def load_image_folder(
    root: Path,
    *,
    image_size: tuple[int, int] | None = None,
    channels: int | None = None,
    rescale: float = 1.0 / 255.0,
) -> Dataset:
    """Read ``root/<class>/<image>`` files; labels are class indices in sorted folder order.

    Args:
        root: Folder with one subfolder per class.
        image_size: ``(height, width)`` to resize to; needed when images differ in size.
        channels: 1 (grayscale) or 3 (RGB); default keeps each file's own channels.
        rescale: Multiplies pixel values (the default maps 0..255 to 0..1).

    Returns:
        float32 images ``(N, H, W, C)`` and int64 labels.

    Raises:
        InvalidDataError: No class folders, no images, or an undecodable image.

    Example:
        >>> ds = load_image_folder(Path("flowers"), image_size=(224, 224))  # doctest: +SKIP
    """
    classes = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    files = [
        (path, label)
        for label, name in enumerate(classes)
        for path in sorted((root / name).iterdir())
        if path.suffix.lower() in IMAGE_SUFFIXES
    ]
    if not files:
        raise InvalidDataError(
            f"{root}: no images found; expected one subfolder per class holding "
            f"{'/'.join(sorted(IMAGE_SUFFIXES))} files."
        )
    tf = tensorflow()
    images = []
    for path, _ in files:
        try:
            image = tf.io.decode_image(
                path.read_bytes(), channels=channels or 0, expand_animations=False
            )
        except tf.errors.InvalidArgumentError as error:
            raise InvalidDataError(f"{path}: cannot decode the image; remove or fix it.") from error
        if image_size is not None:
            image = tf.image.resize(image, image_size)
        images.append(np.asarray(image, dtype=np.float32) * rescale)
    try:
        x = np.stack(images)
    except ValueError as error:
        raise InvalidDataError(
            f"{root}: images differ in size or channels; pass image_size and channels."
        ) from error
    return Dataset(x, np.array([label for _, label in files], dtype=np.int64))
