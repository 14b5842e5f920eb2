"""Audio clips for ``tfcompress data``: PCM ``.wav`` read with the standard library.

Each clip becomes mono float32 samples in [-1, 1] (8-bit PCM is unsigned, the others signed,
as the WAV format says), resampled to one rate and cut or zero-padded at its end to one
length. Resampling uses SciPy's polyphase filter (``resample_poly``, anti-aliased) when SciPy
is installed (it comes with the ``data`` extra), else linear interpolation.
"""

from __future__ import annotations

import io
import math
import wave
from pathlib import Path

import numpy as np

from tfcompress._files import read_regular_bytes
from tfcompress.errors import InvalidDataError

AUDIO_SUFFIXES = frozenset({".wav"})
_FULL_SCALE = {1: 128.0, 2: 32768.0, 3: 8388608.0, 4: 2147483648.0}


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


def fit_length(clip: np.ndarray, length: int) -> np.ndarray:
    """``clip`` cut to ``length`` samples, or zero-padded at its end."""
    return np.pad(clip[:length], (0, max(0, length - len(clip))))


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
