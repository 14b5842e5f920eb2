"""Get a Keras model onto a microcontroller: full int8, TFLite Micro's verdict, a C array.

Run: .venv/bin/python examples/mcu_check.py [OUT_DIR]
Needs tflite-micro (pip install 'tfcompress[mcu]'). A small CNN is trained for one epoch on
real MNIST digits, quantized with ``target="mcu"`` (full int8, int8 input and output, no
float fallback) and checked by TFLite Micro on this machine: every op has a kernel, the
smallest tensor arena (a host estimate, with the size to declare), the flash, and TFLM's
outputs against LiteRT's reference kernels on 200 test digits (and, through the ``tflm``
benchmark backend, its accuracy beside LiteRT's). The model is then written as
``model_data.cc`` / ``model_data.h`` for the firmware, and the budget of a 64 KB-RAM board
is checked the way ``tfcompress mcu --max-arena 64KB`` checks it.
"""

import sys
import tempfile
from pathlib import Path

import tfcompress
import tfcompress.mcu
from tfcompress.samples import mnist, small_cnn, train_classifier


def main(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    split = mnist()
    model = train_classifier(small_cnn(), split.train.take(1500), epochs=1)
    result = tfcompress.quantize(model, representative_data=split.train, target="mcu")
    path = result.save(out_dir / "mnist_mcu.tflite", overwrite=True)
    print(result, end="\n\n")  # the conversion, then TFLM's verdict on 8 random inputs

    test = split.test.take(200)
    report = tfcompress.mcu.check(path, sample_data=test.x, max_samples=200, max_arena=64_000)
    print(report, end="\n\n")
    # Where TFLM's and LiteRT's kernels round differently, what matters is the accuracy the
    # board will have: the tflm backend runs the test digits through TFLM itself.
    scores = tfcompress.benchmark(
        {"mnist_mcu": str(path)}, data=test, backends=["cpu", "tflm"], batch_sizes=[1]
    )
    accuracy = {row.backend: row.accuracy for row in scores.rows}
    print(f"accuracy on 200 digits: LiteRT int8 {accuracy['cpu']:.1%}, TFLM {accuracy['tflm']:.1%}")
    written = tfcompress.mcu.export_c(path, out_dir / "model_data", overwrite=True)
    print(written)
    arena = report.arena
    print(
        f"declare alignas(16) uint8_t tensor_arena[{arena.recommended}]; the model: "
        f"{written.name} ({report.flash_bytes:,} B of flash)"
    )
    if not (report.compatible and report.within_budgets):
        raise SystemExit("the CNN should run on TFLM within a 64 KB arena")
    if abs(accuracy["tflm"] - accuracy["cpu"]) > 0.01:
        raise SystemExit("TFLM should score what LiteRT's int8 kernels score")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()))
