"""Image folders with one hostile entry: decompression bombs, cut files, loops, disguises."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import numpy as np

from fuzzing.mutations import STRATEGIES, Mutant
from fuzzing.seeds import Seeds, png


def _bomb_png(rng: np.random.Generator) -> bytes:
    side = int(rng.integers(12_000, 60_000))
    content = bytearray(png(8, 8))
    content[16:24] = struct.pack(">II", side, side)  # the header lies; the CRC is not checked
    return bytes(content)


def _gif_frames(rng: np.random.Generator) -> bytes:
    side, frames = 256, int(rng.integers(2_000, 20_000))
    frame = b"\x2c" + struct.pack("<HHHH", 0, 0, side, side) + b"\x00" + b"\x02\x02\x4c\x01\x00"
    screen = b"GIF89a" + struct.pack("<HH", side, side) + b"\x80\x00\x00" + b"\0" * 6
    return screen + frame * frames + b"\x3b"


def _folder(seeds: Seeds, folder: Path) -> Path:
    return Path(shutil.copytree(seeds.images, folder / "images"))


def _image(kind: str, must_fail: bool = True):
    def make(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
        images = _folder(seeds, folder)
        target = images / "a" / "hostile.png"
        if kind == "bomb":
            target.write_bytes(_bomb_png(rng))
        elif kind == "gif_frames":
            target.with_suffix(".gif").write_bytes(_gif_frames(rng))
        elif kind == "truncated":
            content = png(8, 8)
            target.write_bytes(content[: int(rng.integers(1, len(content) - 1))])
        elif kind == "symlink_loop":
            target.symlink_to(target.name)
        elif kind == "folder_loop":
            (images / "loop").symlink_to(images)  # a class that is the image root itself
        elif kind == "disguised":
            target.write_bytes(b"RIFF\x24\x00\x00\x00WEBPVP8 " + rng.bytes(24))
        return Mutant(images, "data", must_fail=must_fail)

    return make


STRATEGIES.update(
    {
        "images.bomb_png": _image("bomb"),
        "images.gif_frames": _image("gif_frames"),
        "images.truncated": _image("truncated"),
        "images.symlink_loop": _image("symlink_loop"),
        "images.folder_loop": _image("folder_loop", must_fail=False),
        "images.disguised_webp": _image("disguised"),
        "images.valid": _image("valid", must_fail=False),
    }
)
