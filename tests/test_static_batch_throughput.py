"""True throughput for static-batch files: samples per call, latency per call and per sample.

A file fixed at 8 or 32 samples per call computes that many samples in every call, whatever
batch was asked: its row is timed at whole calls, its samples per second count them, and
``x ref`` compares latency per sample with the dynamic-batch reference. Measured through the
CPU backend (the arithmetic is the same on every backend).
"""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

import tfcompress
from tfcompress.bench.result import BenchmarkResult, BenchmarkRow
from tfcompress.bench.rows import true_batches
from tfcompress.bench.stats import LatencyStats
from tfcompress.quantization import Recipe
from tfcompress.report.schema import validate_report
from tfcompress.report.writers import to_csv

TIMING = {"runs": 10, "min_seconds": 0.02, "warmup_runs": 1, "warmup_seconds": 0.0}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The demo CNN (untrained: latency does not depend on weights) at batches N, 8 and 32."""
    from tfcompress.samples.cnn import small_cnn

    model = small_cnn()
    root = tmp_path_factory.mktemp("static_batch")
    paths = {}
    for name, batch in (("dynamic", None), ("b8", 8), ("b32", 32)):
        made = tfcompress.quantize(model, recipe=Recipe("float32", static_batch=batch))
        paths[name] = root / f"cnn_{name}.tflite"
        paths[name].write_bytes(made.model_content)
    return paths


def _rows(result: BenchmarkResult) -> dict[tuple[str, int | None], BenchmarkRow]:
    return {(row.artifact, row.batch): row for row in result.rows}


def test_static_batch_rows_count_every_sample_a_call_computes(files):
    result = tfcompress.benchmark(
        {name: str(path) for name, path in files.items()},
        backends=("cpu",),
        batch_sizes=(1,),
        reference="dynamic",
        **TIMING,
    )
    rows = _rows(result)
    assert set(rows) == {("dynamic", 1), ("b8", 8), ("b32", 32)}  # batch 1 asked of each
    reference = rows[("dynamic", 1)]
    assert (reference.samples_per_call, reference.calls) == (1, 1)
    for name, static in (("b8", 8), ("b32", 32)):
        row = rows[(name, static)]
        assert row.ok, row.status
        assert (row.samples_per_call, row.calls) == (static, 1)
        assert row.details["batch_asked"] == [1] and row.details["static_batch"] == static
        # samples per second count all the samples of each call, not calls per second
        assert row.throughput_per_s == pytest.approx(static * 1000.0 / row.latency.p50)
        assert row.latency_per_call_ms == pytest.approx(row.latency.p50)
        assert row.latency_per_sample_ms == pytest.approx(row.latency.p50 / static)
        # x ref: per sample, against the reference's batch-1 call
        expected = reference.latency.p50 / (row.latency.p50 / static)
        assert row.speedup == pytest.approx(expected)
        data = row.to_dict()
        assert (data["batch"], data["samples_per_call"], data["calls"]) == (static, static, 1)
        assert data["latency_per_sample_ms"] == pytest.approx(row.latency.p50 / static, abs=1e-6)
    # A call of 32 samples costs more than one of 1, and less per sample (the arithmetic
    # above, not the speed of this machine, is what the test checks; this is a sanity bound).
    assert rows[("b32", 32)].latency.p50 > reference.latency.p50
    table = result.table()
    assert "ms/sample" in table.splitlines()[0]
    report = json.loads(json.dumps(result.to_dict()))
    validate_report(report)
    header = next(csv.reader(io.StringIO(to_csv(result))))
    assert {"samples_per_call", "calls", "latency_per_call_ms", "latency_per_sample_ms"} <= set(
        header
    )


def test_a_batch_larger_than_the_static_batch_runs_as_whole_calls(files):
    result = tfcompress.benchmark(
        {"b8": str(files["b8"])}, backends=("cpu",), batch_sizes=(1, 8, 12), **TIMING
    )
    rows = _rows(result)
    assert set(rows) == {("b8", 8), ("b8", 16)}  # 1 and 8 are one call of 8; 12 is two calls
    assert rows[("b8", 8)].details["batch_asked"] == [1, 8]
    two = rows[("b8", 16)]
    assert (two.calls, two.samples_per_call, two.details["batch_asked"]) == (2, 8, [12])
    assert two.latency_per_call_ms == pytest.approx(two.latency.p50 / 2)
    assert two.latency_per_sample_ms == pytest.approx(two.latency.p50 / 16)
    assert two.throughput_per_s == pytest.approx(16 * 1000.0 / two.latency.p50)
    assert "ok (2 calls of 8)" in result.table()


def test_true_batches_round_up_to_whole_calls():
    assert true_batches((1, 8, 32), 8) == [(8, (1, 8)), (32, (32,))]
    assert true_batches((1, 4, 40), 32) == [(32, (1, 4)), (64, (40,))]
    assert true_batches((1, 4), None) == [(1, (1,)), (4, (4,))]


def test_compress_latency_objective_compares_per_sample(monkeypatch, files):
    """compress times a candidate at batch 1: a file fixed at 8 reports its call over 8."""
    from tfcompress.bench import harness
    from tfcompress.quantization.methods.slow_ops import measure_latency

    stats = LatencyStats(10, 8.0, 0.1, 7.8, 8.0, 8.4, 8.6, 8.7)
    row = BenchmarkRow("b8", "cpu", 1, 8, latency=stats, details={"static_batch": 8, "calls": 1})

    def fake(*args, **kwargs):
        return BenchmarkResult(rows=(row,), environment=None, settings={})  # type: ignore[arg-type]

    monkeypatch.setattr(harness, "benchmark", fake)
    content = files["b8"].read_bytes()
    assert measure_latency(content, backend="cpu", threads=1, name="b8") == pytest.approx(1.0)


def test_selection_latency_is_per_sample_too():
    row = BenchmarkRow("m", "gpu", 1, 32, latency=LatencyStats(5, 3.2, 0, 3, 3.2, 3.3, 3.4, 3.5))
    assert row.latency_per_sample_ms == pytest.approx(0.1)
    assert np.isclose(row.throughput_per_s, 32 * 1000.0 / 3.2)


def test_samples_per_second_and_ms_per_sample_share_the_median():
    """A noisy run (mean twice the median): the two columns still say the same speed."""
    stats = LatencyStats(runs=10, mean=4.0, std=3.0, min=1.9, p50=2.0, p90=9.0, p99=10.0, max=11.0)
    row = BenchmarkRow("m", "cpu", 1, 8, latency=stats)
    assert row.latency_per_sample_ms == pytest.approx(0.25)
    assert row.throughput_per_s == pytest.approx(4000.0)  # 8 samples / 2 ms, not / 4 ms
    assert row.throughput_per_s * row.latency_per_sample_ms == pytest.approx(1000.0)


class _Spy:
    """A native object whose methods are counted while the bound call runs."""

    def __init__(self, target: object) -> None:
        self._target = target
        self.calls: dict[str, int] = {}
        self.args: dict[str, list[tuple]] = {}

    def __getattr__(self, name: str):
        attribute = getattr(self._target, name)
        if not callable(attribute):
            return attribute

        def counted(*args, **kwargs):
            self.calls[name] = self.calls.get(name, 0) + 1
            self.args.setdefault(name, []).append(args)
            return attribute(*args, **kwargs)

        return counted


def _timed(runner, spy: _Spy, module, x: np.ndarray, monkeypatch) -> tuple[dict, int]:
    """Bind ``x``, then run the bound call once: native calls and input conversions it made."""
    converted = []
    real = module.quantize
    monkeypatch.setattr(module, "quantize", lambda *a: converted.append(1) or real(*a))
    call = runner.bind(x)
    spy.calls.clear()
    spy.args.clear()
    converted.clear()
    call()
    return dict(spy.calls), len(converted)


@pytest.mark.parametrize("samples", [3, 8, 24])
def test_a_batch_of_several_calls_is_timed_like_one_call_on_litert(files, monkeypatch, samples):
    """Per call, the timed run does the same in both cases: copy converted inputs, invoke.

    Before, each of several calls also converted its inputs and read its outputs back
    inside the timed loop while a single call only invoked: 1.56x per sample at batch 8.
    """
    from tfcompress.runtime import create_runner, litert

    x = np.random.default_rng(0).random((samples, 28, 28, 1), dtype=np.float32)
    with create_runner(str(files["b8"]), backend="cpu", threads=1) as runner:
        expected = runner.predict(x)
        spy = _Spy(runner.interpreter)
        runner.interpreter = spy
        calls, conversions = _timed(runner, spy, litert, x, monkeypatch)
        count = -(-samples // 8)
        assert calls == {"set_tensor": count, "invoke": count}  # no conversion, no read-back
        assert conversions == 0
        # each call copied in its own samples: the last call's inputs and outputs are there
        last = spy._target.get_tensor(runner.input_details["index"])
        tail = x[(count - 1) * 8 :]
        np.testing.assert_array_equal(last[: len(tail)], tail)
        output = spy._target.get_output_details()[0]["index"]
        np.testing.assert_allclose(
            spy._target.get_tensor(output)[: len(tail)], expected[(count - 1) * 8 :], rtol=1e-5
        )


def test_a_batch_of_several_calls_is_timed_like_one_call_on_compiled_model(files, monkeypatch):
    """CompiledModel: each call's inputs are written before the loop into buffers of its own."""
    from tfcompress.runtime import compiled_model, create_runner

    x = np.random.default_rng(1).random((24, 28, 28, 1), dtype=np.float32)
    with create_runner(str(files["b8"]), backend="cpu-compiled", threads=1) as runner:
        expected = runner.predict(x)
        spy = _Spy(runner._compiled)
        runner._compiled = spy
        calls, conversions = _timed(runner, spy, compiled_model, x, monkeypatch)
        assert calls == {"run_by_index": 3} and conversions == 0
        used = [args[1] for args in spy.args["run_by_index"]]
        assert len({id(buffers) for buffers in used}) == 3  # three sets of input buffers
        single, single_conversions = _timed(runner, spy, compiled_model, x[:8], monkeypatch)
        assert single == {"run_by_index": 1} and single_conversions == 0
        # the buffers bound for the third call hold its samples: it computes their outputs
        runner.bind(x)()
        (output,) = runner._read().values()
        np.testing.assert_allclose(output, expected[16:], rtol=1e-5)
