"""``--target gpu``: float16 at a static batch, judged on the GPU where one answers.

The recipe and the two ways of judging (compiled in a worker where LiteRT finds a GPU, the
static check otherwise) are the package's (:mod:`tfcompress.targets.gpu`). A file that would
not run whole on a GPU fails the check: ``tfcompress quantize --target gpu`` prints one line
with the ops at fault and the fix, and exits 1. ``compress`` keeps the float16, float32 and
int8 rungs, admits only the artifacts the GPU takes whole, and gates them on the ``gpu``
backend and ranks them by their latency there (unless ``objective="size"``); on a machine
where LiteRT finds no GPU it gates on the CPU and ranks by size, and says so. ``select``
measures candidates on the GPU where there is one, and ranks without latency (accuracy, then
size) where there is none, saying so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from tfcompress.errors import BackendUnavailableError, NativeCrashError, UnsupportedModelError
from tfcompress.targets.base import RecipeRules, Target, register_target

if TYPE_CHECKING:
    from tfcompress.runtime.gpu_support import GpuSupport


COMPILED = "gpu"
STATIC = "static"


@dataclass(frozen=True)
class GpuVerdict:
    """Whether a ``.tflite`` runs whole on LiteRT's GPU, and how that was found out.

    Attributes:
        checked: ``"gpu"`` (compiled on a GPU here) or ``"static"`` (no GPU here: read
            against the delegate's rules).
        support: The static check (always run: it names the ops at fault and the fix).
        fully_accelerated: LiteRT's own answer after compiling (None when checked
            statically; False when the GPU refused the model).
        cpu_ops: The ops that run on the CPU, as LiteRT's delegate listed them (compiled),
            else as the static check finds them.
        device: The GPU's name where one was used (from the driver's tools), else None.
        why_static: Why no GPU compiled it (LiteRT's "no GPU" message), when static.
        refused: LiteRT's refusal when a GPU answered and could not take the model.
    """

    checked: str
    support: GpuSupport
    fully_accelerated: bool | None = None
    cpu_ops: tuple[str, ...] = ()
    cpu_ops_source: str = "static check"
    device: str | None = None
    why_static: str | None = None
    refused: str | None = None

    @property
    def compatible(self) -> bool:
        """The whole file runs on the GPU: LiteRT's word where it compiled, else the check's."""
        if self.checked == COMPILED:
            return self.fully_accelerated is True
        return self.support.compatible

    def fix(self) -> str | None:
        """What makes the file run whole on a GPU (None when it does)."""
        if self.compatible:
            return None
        return self.support.fix() or (
            "rerun with --debug for LiteRT's log; a static batch (--target gpu "
            "--static-batch 1) is the usual fix"
        )

    def failure(self) -> str | None:
        """One line for ``quantize --target gpu`` when the file would not run whole."""
        if self.compatible:
            return None
        how = "compiled on the GPU" if self.checked == COMPILED else "checked statically"
        at_fault = self.support.cause() if not self.support.compatible else ", ".join(self.cpu_ops)
        return (
            f"the artifact would not run whole on the GPU ({how}): {at_fault or 'see --debug'}; "
            f"fix: {self.fix()}"
        )

    def summary(self) -> dict[str, Any]:
        """What a compress attempt keeps."""
        return {
            "compatible": self.compatible,
            "checked": self.checked,
            "fully_accelerated": self.fully_accelerated,
            "cpu_ops": list(self.cpu_ops),
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON form: the verdict, how it was reached, and the static check in full."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "support"}
        return {**data, **self.summary(), "fix": self.fix(), "static_check": self.support.to_dict()}

    def save_beside(self, out: Any, *, overwrite: bool = False) -> dict[str, Any]:
        """Nothing to write: the verdict lives in the JSON."""
        return {}

    def __str__(self) -> str:
        total = self.support.ops_total
        if self.checked == COMPILED:
            head = f"GPU check (compiled on {self.device or 'the GPU'}): "
            if self.compatible:
                return head + f"fully accelerated, all {total} ops on the GPU"
            body = "not fully accelerated" if self.refused is None else "refused by the GPU"
        else:
            head = "GPU check (static: no GPU here): "
            if self.compatible:
                return head + f"all {total} ops are ones LiteRT's GPU delegate takes"
            body = (
                "the whole graph would be refused, nothing runs on the GPU"
                if self.support.graph_refused
                else "would not run whole on a GPU"
            )
        lines = [head + body]
        lines.extend(f"  sized at run time: {tensor}" for tensor in self.support.dynamic_tensors)
        if self.cpu_ops:
            where = "refused" if self.support.graph_refused else "on the CPU"
            lines.append(f"{where} ({self.cpu_ops_source}):")
            lines.extend(f"  {op}" for op in self.cpu_ops)
        lines.append(f"fix: {self.fix()}")
        return "\n".join(lines)


def gpu_verdict(
    content: bytes, *, timeout: float | None = None, label: str = "the artifact"
) -> GpuVerdict:
    """Compile ``content`` on the GPU where LiteRT finds one; check it statically otherwise.

    ``timeout``: seconds the compilation (in a worker process) may take; None: the one time
    limit (``TFCOMPRESS_TIMEOUT``). ``label``: how LiteRT's messages name the file.
    ModelLoadError: not a readable ``.tflite``.

    Example:
        >>> print(gpu_verdict(Path("cnn_b1.tflite").read_bytes()))  # doctest: +SKIP
        GPU check (static: no GPU here): all 8 ops are ones LiteRT's GPU delegate takes
    """
    from tfcompress.bench.environment import detect_gpu
    from tfcompress.bench.isolation import IsolatedRunner
    from tfcompress.models import TFLiteModel
    from tfcompress.runtime.gpu_support import gpu_support

    support = gpu_support(content)
    static_ops = tuple(str(op) for op in support.cpu_ops)
    model = TFLiteModel(content, label=label, verified=True)
    try:
        with IsolatedRunner(model, backend="gpu", timeout=timeout) as runner:
            details = runner.details()
    except BackendUnavailableError as error:  # LiteRT found no GPU (or could not say)
        return GpuVerdict(STATIC, support, cpu_ops=static_ops, why_static=str(error))
    except (UnsupportedModelError, NativeCrashError) as error:  # a GPU that refused it
        return GpuVerdict(
            COMPILED,
            support,
            fully_accelerated=False,
            cpu_ops=static_ops,
            device=detect_gpu(),
            refused=str(error),
        )
    listed = tuple(str(op) for op in details.get("cpu_ops") or ())  # type: ignore[union-attr]
    source = str(details.get("cpu_ops_source") or "LiteRT")
    return GpuVerdict(
        COMPILED,
        support,
        fully_accelerated=bool(details.get("fully_accelerated")),
        cpu_ops=listed,
        cpu_ops_source=source,
        device=detect_gpu(),
    )


@register_target
class GpuTarget(Target):
    """LiteRT's GPU (``CompiledModel``, GPU with CPU fallback): float16 at a static batch."""

    name = "gpu"
    summary = (
        "LiteRT's GPU (CompiledModel): float16 by default, a static batch; compiled where a "
        "GPU answers, checked statically otherwise"
    )
    display_name = "the GPU"
    rules = RecipeRules(
        recipes=("float16", "float32", "int8"), static_batch=1, batch_is_default=True
    )
    default_recipe = "float16"
    latency_backend = "gpu"
    gate_backend = "gpu"
    default_objective = "latency"  # where a GPU runs here; ranked by size otherwise, and said
    fallback_backend = "cpu"  # no GPU here: gate on LiteRT's CPU kernels (float16 or float32)

    def check(self, content: bytes, **options: Any) -> GpuVerdict:
        """Compiled on the GPU where LiteRT finds one, checked statically otherwise."""
        return gpu_verdict(content, **options)

    def failure(self, verdict: Any) -> str | None:
        """The file would not run whole on a GPU: the ops at fault and the fix."""
        return None if verdict is None else verdict.failure()

    def refusal(self, summary: Mapping[str, Any], float_nodes: tuple[str, ...]) -> str | None:
        """Only artifacts the GPU runs whole qualify.

        Example:
            >>> GpuTarget().refusal({"compatible": False, "checked": "static",
            ...                      "cpu_ops": ["SHAPE (op 4): no GPU delegate kernel"]}, ())
            'the GPU would not run it whole (static check): SHAPE (op 4): no GPU delegate kernel'
        """
        if summary.get("compatible") is not False:
            return None
        how = "compiled on the GPU" if summary.get("checked") == COMPILED else "static check"
        ops = "; ".join(list(summary.get("cpu_ops") or [])[:3]) or "see its verdict"
        return f"the GPU would not run it whole ({how}): {ops}"
