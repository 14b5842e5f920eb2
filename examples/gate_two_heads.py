"""Quantize a two-input, two-head model and gate each head, with labels and without.

A detector-shaped model (inputs ``image`` and ``gain``; heads ``cls`` and ``box``) is trained
for a few seconds on the digits bundled with scikit-learn, quantized to int8 with a dict of
calibration inputs, benchmarked without data, then gated output by output: accuracy on the
class head and fidelity (SNR) on the box head, and by fidelity alone on unlabelled data.

Run: .venv/bin/python examples/gate_two_heads.py [OUT_DIR]
"""

import sys
import tempfile
from pathlib import Path

import numpy as np

import tfcompress
from tfcompress.samples.tasks import train_two_head, two_head_cnn, two_input_data
from tfcompress.testing import check_gate


def main(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    digits = tfcompress.samples.digits()
    train, test = two_input_data(digits.train), two_input_data(digits.test, seed=1)
    model = train_two_head(two_head_cnn(), train, epochs=4)

    # Several inputs calibrate from a dict keyed by input name (train.x = {"image", "gain"}).
    int8 = tfcompress.quantize(model, recipe="int8", representative_data=train)
    path = int8.save(out_dir / "two_head_int8.tflite", overwrite=True)
    print(int8)
    print(tfcompress.inspect_model(path))

    # Latency needs no data: every input gets seeded random values of its dtype.
    print(tfcompress.benchmark(path, runs=20, min_seconds=0.2))

    # One .npz, one array per input and labels per output (y_<output name>).
    labelled = out_dir / "test.npz"
    inputs = {"image": test.x["image"], "gain": test.x["gain"]}
    np.savez(labelled, **inputs, y_cls=test.y["cls"], y_box=test.y["box"])
    report = check_gate(model, path, labelled)
    print(report.explain())

    # Most users of a pretrained model have data but no labels: gate by fidelity.
    unlabelled = out_dir / "unlabelled.npz"
    np.savez(unlabelled, **inputs)
    fidelity = check_gate(model, path, unlabelled, min_snr=25)
    print(fidelity.explain())
    if not (report.passed and fidelity.passed):
        raise SystemExit("the int8 model failed a gate")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()))
