"""``tfcompress zoo [PATTERN]``: the registered architectures with params and MACs."""

from __future__ import annotations

import argparse
import json
import logging
from typing import IO, Any

from tfcompress.cli.common import image_shape, positive_float, positive_int

logger = logging.getLogger(__name__)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the subcommand."""
    parser = subparsers.add_parser(
        "zoo",
        help="list the model zoo (MobileNet V1/V2/V3, MixNet) with params and MACs",
        description="List the registered architectures with their family, parameters and "
        "MACs at one input shape. MACs are counted from the Keras layers (the same count the "
        "benchmark harness makes on the converted .tflite), without converting anything.",
    )
    parser.add_argument(
        "pattern",
        nargs="?",
        default="*",
        help="shell-style name pattern (default: all), e.g. 'mixnet*'",
    )
    parser.add_argument(
        "--input-shape",
        type=image_shape,
        default=(224, 224, 3),
        metavar="HxWxC",
        help="input shape (default 224x224x3)",
    )
    parser.add_argument(
        "--num-classes", type=positive_int, default=1000, help="classes (default 1000)"
    )
    parser.add_argument(
        "--width", type=positive_float, default=1.0, help="width multiplier (default 1.0)"
    )
    parser.add_argument(
        "--no-macs",
        action="store_true",
        help="parameters only (MACs shown as '-', null in JSON)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print a JSON list of model_info objects on stdout (logs stay on stderr)",
    )
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Print the table (or ``--json``: a JSON list of ``model_info`` objects)."""
    from tfcompress._compat.tf import require_tensorflow
    from tfcompress.errors import InvalidInputError
    from tfcompress.zoo import list_models, model_info
    from tfcompress.zoo.registry import get_entry, validate_arguments

    names = list_models(args.pattern)
    if not names:
        raise InvalidInputError(
            f"no zoo model matches {args.pattern!r}; known: {', '.join(list_models())}"
        )
    require_tensorflow("zoo (it builds each model to count it)")
    for name in names:  # refuse a bad shape before building any model
        validate_arguments(get_entry(name), args.input_shape, args.num_classes, args.width)
    infos = []
    for index, name in enumerate(names, 1):
        logger.info("[%d/%d] building %s", index, len(names), name)
        infos.append(
            model_info(
                name,
                input_shape=args.input_shape,
                num_classes=args.num_classes,
                width_multiplier=args.width,
                count_macs=not args.no_macs,
            )
        )
    if args.json:
        out.write(json.dumps([info.to_dict() for info in infos]) + "\n")
        return 0
    height, width, channels = args.input_shape
    out.write(
        f"zoo at {height}x{width}x{channels}, {args.num_classes} classes, width {args.width:g}\n"
    )
    rows = [("model", "family", "params", "MACs", "min res")]
    for info in infos:
        macs = "-" if info.macs is None else f"{info.macs / 1e6:.1f}M"
        rows.append(
            (info.name, info.family, f"{info.params / 1e6:.2f}M", macs, str(info.min_resolution))
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [
            cell.ljust(w) if i < 2 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        out.write("  ".join(cells).rstrip() + "\n")
    return 0
