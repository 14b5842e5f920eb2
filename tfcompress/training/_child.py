"""The child of :mod:`tfcompress.training.isolation`: run one fine-tuning technique, reply.

``python -m tfcompress.training._child REQUEST REPLY``: REQUEST is the pickle the parent
wrote (technique, model path, options with the data already loaded); REPLY receives a
pickle of ``{"result": TrainingResult}``, ``{"error": TFCompressError}`` or
``{"bug": "Type: message"}``. A native crash kills only this process; the parent reads the
signal from the exit status. Both files live in the parent's private temporary folder.

Example:
    >>> # python -m tfcompress.training._child request.pickle reply.pickle  # doctest: +SKIP
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import traceback
from dataclasses import replace
from pathlib import Path

CRASH_HOOK = "TFCOMPRESS_TEST_CHILD_CRASH"


def _crash_for_tests() -> None:
    """Die by SIGSEGV, as TensorFlow's kernels do, when the tests ask for it."""
    hook = os.environ.get(CRASH_HOOK, "")
    oneDNN_on = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "") != "0"
    if hook == "always" or (hook == "onednn" and oneDNN_on):
        os.kill(os.getpid(), signal.SIGSEGV)


def main(argv: list[str]) -> int:
    """Run the request in ``argv[1]``, write the reply to ``argv[2]``."""
    if len(argv) != 3:
        print("usage: python -m tfcompress.training._child REQUEST REPLY", file=sys.stderr)
        return 2
    if sys.platform != "win32":  # a crash must not leave a core file of the user's model
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _crash_for_tests()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    request = pickle.loads(Path(argv[1]).read_bytes())  # the parent's own file
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
    Path(argv[2]).write_bytes(pickle.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
