"""The size an image file declares, read from its header before anything is decoded.

TensorFlow's decoders allocate what a header declares: a PNG of 875 KB can declare
20000x20000 RGBA pixels (1.6 GB decoded), a GIF thousands of frames. :func:`read_header`
reads width, height and frame count of the formats ``tf.io.decode_image`` recognises by
their first bytes (PNG, JPEG, GIF, BMP), so the caller can refuse a bomb before decoding.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_PNG = b"\x89PNG\r\n\x1a\n"
# JPEG start-of-frame markers (baseline, progressive, lossless, arithmetic...): C0-CF
# except DHT (C4), JPG (C8) and DAC (CC).
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_JPEG_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8)})


@dataclass(frozen=True)
class ImageHeader:
    """What an image (``PNG``, ``JPEG``, ``GIF`` or ``BMP``) declares about its size."""

    format: str
    width: int
    height: int
    frames: int = 1

    @property
    def pixels(self) -> int:
        """Every pixel the decoder produces: width x height x frames."""
        return self.width * self.height * self.frames


def read_header(content: bytes) -> ImageHeader | None:
    r"""Width, height and frames of a PNG, JPEG, GIF or BMP, from its header alone.

    Raises:
        ValueError: The first bytes name a format but its header is cut or inconsistent.
    """
    if content.startswith(_PNG):
        return _png(content)
    if content.startswith(b"\xff\xd8\xff"):
        return _jpeg(content)
    if content.startswith((b"GIF87a", b"GIF89a")):
        return _gif(content)
    return _bmp(content) if content.startswith(b"BM") else None


def _png(content: bytes) -> ImageHeader:
    if len(content) < 24 or content[12:16] != b"IHDR":
        raise ValueError("the PNG has no IHDR header")
    width, height = struct.unpack(">II", content[16:24])
    return ImageHeader("PNG", width, height)


def _jpeg(content: bytes) -> ImageHeader:
    position = 2
    while position + 4 <= len(content):
        if content[position] != 0xFF:
            raise ValueError("the JPEG's markers are corrupt")
        marker = content[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
            continue
        if marker in _JPEG_STANDALONE:
            position += 2
            continue
        (length,) = struct.unpack(">H", content[position + 2 : position + 4])
        if marker in _JPEG_SOF:
            if position + 9 > len(content):
                break
            height, width = struct.unpack(">HH", content[position + 5 : position + 9])
            return ImageHeader("JPEG", width, height)
        if marker == 0xDA or length < 2:  # scan data before any frame header
            break
        position += 2 + length
    raise ValueError("the JPEG has no frame header")


def _gif(content: bytes) -> ImageHeader:
    if len(content) < 13:
        raise ValueError("the GIF header is cut")
    width, height = struct.unpack("<HH", content[6:10])
    position = 13 + _color_table(content[10])
    frames = 0
    while position < len(content):
        block = content[position]
        if block == 0x3B:  # trailer
            break
        if block == 0x2C:  # image descriptor: a frame, possibly larger than the screen
            if position + 10 > len(content):
                break
            frame_width, frame_height = struct.unpack("<HH", content[position + 5 : position + 9])
            width, height = max(width, frame_width), max(height, frame_height)
            frames += 1
            position += 10 + _color_table(content[position + 9]) + 1  # + LZW code size
            position = _skip_sub_blocks(content, position)
        elif block == 0x21:  # extension: label, then data sub-blocks
            position = _skip_sub_blocks(content, position + 2)
        else:
            break  # garbage after the frames: the decoder stops there too
    return ImageHeader("GIF", width, height, max(frames, 1))


def _color_table(flags: int) -> int:
    return 3 * 2 ** ((flags & 0x07) + 1) if flags & 0x80 else 0


def _skip_sub_blocks(content: bytes, position: int) -> int:
    while position < len(content):
        size = content[position]
        position += 1 + size
        if size == 0:
            break
    return position


def _bmp(content: bytes) -> ImageHeader:
    if len(content) < 26:
        raise ValueError("the BMP header is cut")
    (header_size,) = struct.unpack("<I", content[14:18])
    if header_size == 12:  # OS/2 BITMAPCOREHEADER: 16-bit sizes
        width, height = struct.unpack("<HH", content[18:22])
    else:
        width, height = struct.unpack("<ii", content[18:26])
    return ImageHeader("BMP", abs(width), abs(height))
