"""The samples of benchmarks/real_files.py, made from face photos with ipazc/mtcnn.

Run: .venv/bin/python benchmarks/real_files_data.py --mtcnn MTCNN_SRC --photos DIR --out DIR

``MTCNN_SRC`` is a checkout of github.com/ipazc/mtcnn (its ``mtcnn`` package and weights;
joblib and lz4 installed); ``DIR`` holds the photos: ``12_angry_men``, ``test_image`` and
``ivan`` give the calibration samples, ``solvay_conference`` and ``emotion_classification``
the held-out ones (the example photos of ipazc/mtcnn and oarriaga/face_classification), so
no face is in both. The repo's MTCNN finds the faces; for O-Net every box its stage 3 gets
is cut from the normalised photo ((x - 127.5) / 128) to 48x48 as the stage does
(``crop_and_resize``); for the emotion classifier each face it returns is cut from the gray
photo and resized to 64x64, then ``preprocess_input(x, v2=True)`` (x / 255 * 2 - 1), as
oarriaga/face_classification's demo does. Each box also gives augmented copies (shift up to
10%, scale 0.85-1.15, horizontal flip, brightness 0.7-1.3; seed 0). Writes
``onet_calib.npz``, ``onet_test.npz``, ``emotion_calib.npz`` and ``emotion_test.npz``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

CALIB = ("12_angry_men", "test_image", "ivan")
HELD_OUT = ("solvay_conference", "emotion_classification")


def detect(photo: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The faces MTCNN returns, the normalised photo and the boxes its O-Net stage gets."""
    from mtcnn import MTCNN
    from mtcnn.stages.stage_onet import StageONet

    seen: dict[str, np.ndarray] = {}
    stage = StageONet.__call__

    def capture(self, images_normalized, bboxes_batch, **options):  # type: ignore[no-untyped-def]
        seen["image"], seen["boxes"] = np.asarray(images_normalized)[0], np.asarray(bboxes_batch)
        return stage(self, images_normalized, bboxes_batch, **options)

    StageONet.__call__ = capture
    try:
        faces = MTCNN().detect_faces(str(photo), output_type="numpy", box_format="xyxy")
    finally:
        StageONet.__call__ = stage
    return np.asarray(faces), seen["image"], seen["boxes"]


def _jitter(rng: np.random.Generator, first: bool, shift: float, scale: tuple[float, float]):
    if first:
        return 1.0, 0.0, 0.0, False, 1.0
    s = rng.uniform(*scale)
    dx, dy = rng.uniform(-shift, shift, 2)
    return s, dx, dy, bool(rng.random() < 0.5), rng.uniform(0.7, 1.3)


def onet_patches(image, boxes, copies, rng):  # type: ignore[no-untyped-def]
    import tensorflow as tf

    h, w = image.shape[:2]
    out = []
    for box in boxes:
        x1, y1, x2, y2 = box[1:5]
        for k in range(copies):
            s, dx, dy, flip, bright = _jitter(rng, k == 0, 0.1, (0.85, 1.15))
            cx, cy = (x1 + x2) / 2 + dx * (x2 - x1), (y1 + y2) / 2 + dy * (y2 - y1)
            bw, bh = s * (x2 - x1) / 2, s * (y2 - y1) / 2
            crop = [[(cy - bh) / h, (cx - bw) / w, (cy + bh) / h, (cx + bw) / w]]
            patch = tf.image.crop_and_resize(image[None], crop, [0], (48, 48)).numpy()[0]
            patch = np.clip((patch[:, ::-1] if flip else patch) * 128 + 127.5, 0, 255) * bright
            out.append((np.clip(patch, 0, 255) - 127.5) / 128)
    return out


def emotion_crops(photo, faces, copies, rng):  # type: ignore[no-untyped-def]
    from PIL import Image

    gray = Image.open(photo).convert("L")
    out = []
    for face in faces:
        x1, y1, x2, y2 = face[1:5]
        for k in range(copies):
            s, dx, dy, flip, bright = _jitter(rng, k == 0, 0.08, (0.9, 1.15))
            cx, cy = (x1 + x2) / 2 + dx * (x2 - x1), (y1 + y2) / 2 + dy * (y2 - y1)
            bw, bh = s * (x2 - x1) / 2, s * (y2 - y1) / 2
            box = tuple(round(v) for v in (cx - bw, cy - bh, cx + bw, cy + bh))
            crop = np.asarray(gray.crop(box).resize((64, 64), Image.BILINEAR), np.float32)
            crop = np.clip((crop[:, ::-1] if flip else crop) * bright, 0, 255)
            out.append(((crop / 255.0 - 0.5) * 2.0)[..., None])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mtcnn", type=Path, required=True, help="ipazc/mtcnn checkout")
    parser.add_argument("--photos", type=Path, required=True, help="folder of the .jpg photos")
    parser.add_argument("--out", type=Path, required=True, help="folder for the .npz files")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.path.insert(0, str(args.mtcnn))
    rng = np.random.default_rng(0)
    found = {name: (args.photos / f"{name}.jpg", *detect(args.photos / f"{name}.jpg"))
             for name in (*CALIB, *HELD_OUT)}  # fmt: skip
    splits = (("calib", CALIB, 7, 18), ("test", HELD_OUT, 14, 25))
    for split, photos, copies, _ in splits:  # O-Net first: the seeded order of the files
        onet = [p for n in photos for p in onet_patches(*found[n][2:], copies, rng)]
        np.savez(args.out / f"onet_{split}.npz", x=np.asarray(onet, np.float32))
    for split, photos, _, copies in splits:
        crops = [c for n in photos for c in emotion_crops(*found[n][:2], copies, rng)]
        np.savez(args.out / f"emotion_{split}.npz", x=np.asarray(crops, np.float32))
    print({f.name: np.load(f)["x"].shape for f in sorted(args.out.glob("*.npz"))})


if __name__ == "__main__":
    main()
