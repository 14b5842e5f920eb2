"""The child of :mod:`tfcompress.training.isolation`: run fine-tuning requests, reply to each.

``python -m tfcompress.training._child REQUEST REPLY`` runs one request;
``python -m tfcompress.training._child --serve`` stays warm and runs one request per line of
standard input (``REQUEST<TAB>REPLY``), answering ``done`` on its standard output after each,
until standard input closes or no request came for :data:`IDLE_SECONDS`. REQUEST is the pickle
the parent wrote (technique, model path, options with the data already loaded); REPLY receives
a pickle of ``{"result": TrainingResult}``, ``{"error": TFCompressError}`` or
``{"bug": "Type: message"}``. A native crash kills only this process; the parent reads the
signal from the exit status. The files live in the parent's private temporary folder.

Example:
    >>> # python -m tfcompress.training._child request.pickle reply.pickle  # doctest: +SKIP
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import sys
import traceback
from dataclasses import replace
from pathlib import Path

CRASH_HOOK = "TFCOMPRESS_TEST_CHILD_CRASH"
#: A warm child with nothing to do for this long exits (it holds TensorFlow's memory).
IDLE_SECONDS = 300.0
SERVE = "--serve"


def _crash_for_tests() -> None:
    """Die by SIGSEGV, as TensorFlow's kernels do, when the tests ask for it."""
    hook = os.environ.get(CRASH_HOOK, "")
    oneDNN_on = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "") != "0"
    if hook == "always" or (hook == "onednn" and oneDNN_on):
        os.kill(os.getpid(), signal.SIGSEGV)


def main(argv: list[str]) -> int:
    """Run the request in ``argv[1]`` (reply to ``argv[2]``), or serve with ``--serve``."""
    if argv[1:] != [SERVE] and len(argv) != 3:
        print(
            f"usage: python -m tfcompress.training._child REQUEST REPLY | {SERVE}",
            file=sys.stderr,
        )
        return 2
    from tfcompress._lifetime import prepare_child

    prepare_child()  # no core file of the user's model; on Linux, die with the parent
    _crash_for_tests()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # Conversions of the fine-tuned model run here: this child contains them already.
    os.environ["TFCOMPRESS_IN_PROCESS"] = "1"
    from tfcompress._compat.heap import own_this_process

    own_this_process()  # heavy imports are frozen: every request's collections walk less
    if argv[1:] == [SERVE]:
        return _serve()
    _answer(Path(argv[1]), Path(argv[2]))
    return 0


def _serve() -> int:
    """Answer requests from standard input until it closes or stays idle too long."""
    # The answers get a private copy of stdout; anything the libraries print goes to stderr,
    # so a progress bar can never be read as an answer.
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], IDLE_SECONDS)
        line = sys.stdin.readline() if ready else ""
        if not line.strip():  # closed, or idle: the parent starts a fresh child when needed
            return 0
        request, reply = line.rstrip("\n").split("\t")
        _answer(Path(request), Path(reply))
        _forget_models()
        answers.write("done\n")


def _answer(request_path: Path, reply: Path) -> None:
    """Run one request and write its reply."""
    request = pickle.loads(request_path.read_bytes())  # the parent's own file
    from tfcompress.errors import TFCompressError
    from tfcompress.models import load_model
    from tfcompress.training.cluster import cluster
    from tfcompress.training.prune import prune
    from tfcompress.training.qat import qat

    verbs = {"qat": qat, "prune": prune, "cluster": cluster}

    try:
        model = load_model(request["model"], safe_mode=request["safe_mode"])
        result = verbs[request["technique"]](model, isolate=False, **request["options"])
        answer: dict[str, object] = {"result": replace(result, keras_model=None)}
    except TFCompressError as error:
        answer = {"error": error}
    # Anything else is a bug; the parent raises it with this text (its CLI exits 3).
    except Exception as error:
        lines = traceback.format_exception(error)
        print("".join(lines), file=sys.stderr)
        answer = {"bug": f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"}
    reply.write_bytes(pickle.dumps(answer))


def _forget_models() -> None:
    """Reset Keras' global state, so the next request starts as in a fresh process.

    Layer-name counters and graphs of the last model would otherwise change the names (and
    so the bytes) of the next export.
    """
    import gc

    for name in ("keras", "tf_keras"):
        module = sys.modules.get(name)
        if module is not None:
            module.backend.clear_session()
    gc.collect()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
