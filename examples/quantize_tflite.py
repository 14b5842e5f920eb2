"""Quantize a .tflite you already have, with LiteRT Quantizer: rules, int4, per-tensor errors.

Run: .venv/bin/python examples/quantize_tflite.py [OUT_DIR]
Trains a small MediaPipe-shaped landmarker (image in; landmarks, presence, classes out) on
the 1,797 digits bundled with scikit-learn, writes it the way shipped files are written (no
signature, op codes in the old 8-bit field, float16 weights), then quantizes that file
without TensorFlow's converter: int8, int8 with the presence head in int16 (a rule), and
int4 weights; gates each on every output, and prints the worst tensors. Nothing is
downloaded. With TFC_EXAMPLE_QUICK=1 (what CI's test of this file sets) it trains 3 epochs.
"""

import os
import sys
import tempfile
from pathlib import Path

import tfcompress
from tfcompress.samples.landmarker import landmark_model, shipped_tflite

QUICK = os.environ.get("TFC_EXAMPLE_QUICK") == "1"


def main(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)  # a new folder is fine; a bad one fails now
    model, (train, test) = landmark_model(epochs=3 if QUICK else 12)
    shipped = out_dir / "landmarker.tflite"
    shipped.write_bytes(shipped_tflite(model, "mediapipe"))  # what a vendor hands you

    calib = train.x[:200]
    int8 = tfcompress.quantize(shipped, recipe="int8", representative_data=calib)
    head_int16 = tfcompress.quantize(
        shipped,
        recipe="int8",
        rules=[{"pattern": "presence", "op_type": "FULLY_CONNECTED", "mode": "int16"}],
        representative_data=calib,
        layer_errors=True,
    )
    int4 = tfcompress.quantize(shipped, recipe="int4-weights")
    for name, result in (("int8", int8), ("int8_head_int16", head_int16), ("int4", int4)):
        print(result)
        gate = tfcompress.check_gate(result.reference, result.model, test.x, min_snr=20)
        print(f"  gate on every output: {gate.headline()}")
        result.save(out_dir / f"landmarker_{name}.tflite", overwrite=True)
    print(
        f"wrote {', '.join(f'landmarker_{n}.tflite' for n in ('int8', 'int8_head_int16', 'int4'))}"
        f" to {out_dir}"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="tflite_")))
