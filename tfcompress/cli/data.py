"""``tfcompress data SOURCE``: calib.npz, test.npz and train.npz from images, audio or arrays."""

from __future__ import annotations

import argparse
from typing import IO, Any

from tfcompress.cli.common import add_shared_flags, emit, load_cli_model, positive_int, seed


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the subcommand."""
    parser = subparsers.add_parser(
        "data",
        help="make calib.npz, test.npz and train.npz from an image or audio folder, .npy or .csv",
        description="Turn what you have into the split files every command reads: an image "
        "or .wav folder (one subfolder per class: labelled; files directly in it: unlabelled), "
        "a .npy, a .csv (one sample per row; a 'label' or 'y' column holds the labels) or an "
        ".npz. With --model the samples are fitted to its input: images decoded at its size "
        "and channels, clips resampled and cut or padded to its length, arrays reshaped, all "
        "cast to its dtype. The split is stratified by label and fixed by --seed; calib.npz "
        "is the first training samples, without labels. Scaling (--scale auto): images to "
        "[0, 1], or 0..255 when the Keras model starts with a Rescaling layer or takes "
        "integers; audio in [-1, 1]; arrays as read.",
    )
    parser.add_argument("source", help="image or .wav folder, .npy, .csv or .npz file")
    parser.add_argument("--model", help="fit the samples to this model's input (any format)")
    parser.add_argument(
        "--out-dir", default=".", metavar="DIR", help="where the three files go (default .)"
    )
    parser.add_argument(
        "--test-fraction",
        type=float,
        default=0.25,
        help="share of each class held out in test.npz (default 0.25)",
    )
    parser.add_argument(
        "--calib-samples",
        type=positive_int,
        default=500,
        metavar="N",
        help="samples in calib.npz, taken from the training split (default 500)",
    )
    parser.add_argument("--seed", type=seed, default=0, help="fixes the split (default 0)")
    parser.add_argument(
        "--scale",
        choices=("auto", "0,1", "-1,1", "none"),
        default="auto",
        help="auto (above), 0,1 or -1,1 (linear from the source's range: 0..255 for images, "
        "-1..1 for audio, min..max for arrays), or none (as read)",
    )
    parser.add_argument(
        "--sample-rate",
        type=positive_int,
        default=16000,
        metavar="HZ",
        help="rate .wav clips are resampled to (default 16000)",
    )
    parser.add_argument(
        "--label-column", metavar="NAME", help="the .csv column of labels (default label or y)"
    )
    add_shared_flags(parser, "force", "unsafe", "custom_objects", "json")
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Write the three files and print what they hold (bad input: nothing written)."""
    from tfcompress.data.prepare import prepare_data

    model = None if args.model is None else load_cli_model(args, args.model)
    result = prepare_data(
        args.source,
        model=model,
        out_dir=args.out_dir,
        test_fraction=args.test_fraction,
        calib_samples=args.calib_samples,
        seed=args.seed,
        scale=args.scale,
        sample_rate=args.sample_rate,
        label_column=args.label_column,
        overwrite=args.force,
    )
    emit(out, result, args.json)
    return 0
