"""Latency statistics, the measuring loop, environment parsing, Pareto front and ratios."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tfcompress.bench.analysis import int8_notes, recipe_notes, with_ratios
from tfcompress.bench.environment import Environment, capture_environment, parse_cpuinfo
from tfcompress.bench.result import BenchmarkRow
from tfcompress.bench.size import SizeInfo
from tfcompress.bench.stats import measure, summarize
from tfcompress.errors import InvalidInputError
from tfcompress.report.plots import pareto_front


def test_summarize_known_values():
    stats = summarize([0.001, 0.002, 0.003, 0.004, 0.010])  # seconds -> ms
    assert stats.runs == 5
    assert stats.mean == pytest.approx(4.0)
    assert stats.std == pytest.approx(np.std([1, 2, 3, 4, 10]))  # population std
    assert (stats.min, stats.max) == (pytest.approx(1.0), pytest.approx(10.0))
    assert stats.p50 == pytest.approx(3.0)
    assert stats.p90 == pytest.approx(4 + 0.6 * 6)  # linear between 4 and 10
    assert stats.p99 == pytest.approx(4 + 0.96 * 6)


def test_summarize_rejects_no_runs():
    with pytest.raises(InvalidInputError, match="no timed runs"):
        summarize([])


class FakeClock:
    """Each call of the model advances time by the next scripted duration."""

    def __init__(self, durations, then=None):
        self.now = 0.0
        tail = itertools.repeat(then) if then is not None else itertools.cycle(durations)
        self.durations = itertools.chain(durations if then is not None else [], tail)
        self.calls = 0

    def clock(self):
        return self.now

    def call(self):
        self.calls += 1
        self.now += next(self.durations)


def test_measure_times_first_call_apart_and_honours_runs_and_seconds():
    fake = FakeClock([0.5], then=0.01)  # first call slow, then 10 ms
    timing = measure(
        fake.call, runs=5, min_seconds=0.2, warmup_runs=2, warmup_seconds=0, clock=fake.clock
    )
    assert timing.first_ms == pytest.approx(500.0)
    assert timing.warmup_runs == 2
    # 5 runs would take 0.05 s (< 0.2 s): the loop keeps going until 0.2 s are spent.
    assert 20 <= timing.latency.runs <= 21
    assert timing.latency.p50 == pytest.approx(10.0)
    assert timing.latency.max == pytest.approx(10.0)  # the slow first call is not a timed run


def test_measure_runs_at_least_n_when_time_is_short():
    fake = FakeClock([0.002])
    timing = measure(fake.call, runs=7, min_seconds=0, warmup_seconds=0, clock=fake.clock)
    assert timing.latency.runs == 7
    assert timing.latency.mean == pytest.approx(2.0)
    assert fake.calls == 1 + 7  # the first call doubles as the only warm-up run


def test_measure_stops_at_max_seconds():
    fake = FakeClock([1.0])
    timing = measure(
        fake.call, runs=2, min_seconds=100, max_seconds=3, warmup_seconds=0, clock=fake.clock
    )
    assert timing.latency.runs == 3


def test_measure_rejects_bad_options():
    with pytest.raises(InvalidInputError):
        measure(lambda: None, runs=0)
    with pytest.raises(InvalidInputError):
        measure(lambda: None, min_seconds=-1)


X86 = "model name : Intel Xeon\nflags : fpu sse avx2 fma avx512f avx512_vnni amx_int8\n"
ARM = "processor : 0\nFeatures : fp asimd asimddp i8mm\nCPU part : 0xd0b\nHardware : BCM2712\n"
OLD_X86 = "model name : Intel Core i7-6700\nflags : fpu avx avx2 fma\n"


def test_parse_cpuinfo_x86_and_arm():
    assert parse_cpuinfo(X86) == (
        "Intel Xeon",
        ("AVX2", "FMA", "AVX-512", "AVX512-VNNI", "AMX-INT8"),
    )
    assert parse_cpuinfo(ARM) == ("BCM2712", ("NEON", "DOTPROD", "I8MM"))
    assert parse_cpuinfo("") == ("", None)  # no flags line: unknown, not "none"


def test_capture_environment_is_tensorflow_free_and_complete():
    import sys

    had_tf = "tensorflow" in sys.modules
    env = capture_environment(cpuinfo=X86)
    assert env.int8_dot_product == ("AVX512-VNNI", "AMX-INT8")
    assert env.cpu_flags_source == "/proc/cpuinfo"
    data = env.to_dict()
    assert {"cpu", "cpu_flags", "cpu_flags_source", "cores", "gpu", "versions"} <= set(data)
    assert "numpy" in data["versions"]
    assert had_tf or "tensorflow" not in sys.modules


def test_kernel_flags_without_int8_extensions_mean_none():
    env = capture_environment(cpuinfo=OLD_X86)
    assert env.cpu_flags == ("AVX2", "FMA") and env.int8_dot_product == ()
    assert env.int8_dot_product_unknown_because is None
    assert "AVX2, FMA (from /proc/cpuinfo)" in str(env)


def _no_py_cpuinfo(monkeypatch):
    from tfcompress.bench import environment

    monkeypatch.setattr(environment, "_py_cpuinfo", lambda: {})


def test_no_source_means_unknown_not_none(monkeypatch):
    """macOS/Windows without an answer from py-cpuinfo: unknown, never "no instructions"."""
    _no_py_cpuinfo(monkeypatch)
    env = capture_environment(cpuinfo="")  # no /proc/cpuinfo, as on macOS and Windows
    assert env.cpu_flags is None and env.cpu_flags_source is None
    assert env.int8_dot_product is None
    data = env.to_dict()
    assert data["cpu_flags"] is None and data["int8_dot_product"] is None
    assert "Flags:    unknown" in str(env)
    # A /proc/cpuinfo without a flags line (s390, some boards) is no evidence either.
    assert capture_environment(cpuinfo="processor : 0\nvendor_id : IBM/S390\n").cpu_flags is None


@pytest.mark.parametrize(
    ("info", "flags", "dots"),
    [
        # macOS on Intel: sysctl's upper-case names; Windows: py-cpuinfo's CPUID probe.
        ({"brand_raw": "Intel Core i9", "flags": ["avx2", "fma", "avx512vnni"]},
         ("AVX2", "FMA", "AVX512-VNNI"), ("AVX512-VNNI",)),
        ({"brand_raw": "Intel Core i7", "flags": ["AVX2", "FMA", "AVX1.0"]},
         ("AVX2", "FMA"), None),
        # Apple Silicon: py-cpuinfo knows the model but lists no flags.
        ({"brand_raw": "Apple M2", "arch": "ARM_8"}, None, None),
    ],
)  # fmt: skip
def test_py_cpuinfo_when_there_is_no_proc_cpuinfo(monkeypatch, info, flags, dots):
    from tfcompress.bench import environment

    monkeypatch.setattr(environment, "_py_cpuinfo", lambda: info)
    env = capture_environment(cpuinfo="")
    assert env.cpu == info["brand_raw"]
    assert env.cpu_flags == flags
    assert env.cpu_flags_source == ("py-cpuinfo" if flags is not None else None)
    # py-cpuinfo cannot see AVX-VNNI or AMX: finding no int8 extension proves nothing.
    assert env.int8_dot_product == dots
    if dots is None:
        assert env.int8_dot_product_unknown_because


def test_py_cpuinfo_missing_or_failing_is_logged_and_unknown(monkeypatch, caplog):
    import sys

    from tfcompress.bench.environment import _py_cpuinfo

    caplog.set_level("INFO", logger="tfcompress.bench.environment")
    monkeypatch.setitem(sys.modules, "cpuinfo", None)  # as if not installed
    assert _py_cpuinfo() == {}
    assert "pip install 'py-cpuinfo" in caplog.text
    monkeypatch.undo()
    import cpuinfo

    def broken() -> dict:
        raise OSError("cannot start a child process")

    monkeypatch.setattr(cpuinfo, "get_cpu_info", broken)
    assert _py_cpuinfo() == {}
    assert "cannot start a child process" in caplog.text


def test_real_py_cpuinfo_reads_this_machine():
    import platform

    from tfcompress.bench.environment import _py_cpuinfo

    info = _py_cpuinfo()
    assert info.get("brand_raw") or info.get("arch")
    if platform.machine() in {"x86_64", "AMD64"}:  # every x86-64 CPU has SSE2
        assert "sse2" in info["flags"]


def test_detect_cpu_is_cached():
    from tfcompress.bench.environment import detect_cpu

    assert detect_cpu() is detect_cpu()


def test_pareto_front():
    points = [(1.0, 0.90), (2.0, 0.95), (3.0, 0.93), (1.5, 0.89), (2.0, 0.95)]
    assert pareto_front(points) == [0, 1, 4]
    assert pareto_front([]) == []


def _row(name, precision, p50, *, backend="cpu", macs=100, size=1000):
    from tfcompress.bench.stats import LatencyStats

    latency = LatencyStats(10, p50, 0.0, p50, p50, p50, p50, p50)
    info = SizeInfo(size, size, 10, macs, 5, precision)
    return BenchmarkRow(name, backend, 1, 1, size=info, latency=latency)


def _env(flags, source="/proc/cpuinfo"):
    return Environment("cpu", "x86_64", flags, 2, 2, None, "linux", "3.11", cpu_flags_source=source)


def test_ratios_against_reference():
    rows = with_ratios(
        [_row("f32", "float32", 4.0, size=1000), _row("i8", "int8", 2.0, size=250)], "f32"
    )
    assert rows[1].speedup == pytest.approx(2.0)
    assert rows[1].size_ratio == pytest.approx(0.25)
    assert rows[0].speedup == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("flags", "int8_ms", "expected"),
    [
        ((), 5.0, ["int8 is slower", "no int8 dot-product instructions"]),
        (("AVX512-VNNI",), 2.0, ["int8 is faster", "AVX512-VNNI"]),
        (("AMX-INT8",), 4.1, ["int8 is not faster", "even though this CPU has"]),
    ],
)
def test_int8_notes_follow_measured_numbers_and_flags(flags, int8_ms, expected):
    rows = [_row("f32", "float32", 4.0), _row("i8", "int8", int8_ms)]
    notes = int8_notes(rows, _env(flags))
    assert len(notes) == 1
    for text in expected:
        assert text in notes[0]


@pytest.mark.parametrize(
    ("flags", "source", "int8_ms", "expected"),
    [
        (None, None, 5.0, ["int8 is slower", "is unknown (no source could read", "cannot be"]),
        (None, None, 2.0, ["int8 is faster", "is unknown (no source could read"]),
        (("AVX2",), "py-cpuinfo", 5.0, ["int8 is slower", "is unknown (the flags come from"]),
    ],
)
def test_int8_notes_say_unknown_when_the_flags_are(flags, source, int8_ms, expected):
    rows = [_row("f32", "float32", 4.0), _row("i8", "int8", int8_ms)]
    (note,) = int8_notes(rows, _env(flags, source))
    for text in expected:
        assert text in note
    # Never a claim about what the CPU lacks (or has) when nobody could tell.
    assert "has no int8" not in note and "this CPU's int8 dot-product instructions (" not in note
    assert "even without" not in note


@pytest.mark.parametrize("flags", [(), None])
def test_int8_notes_measured_on_the_device_do_not_advise_measuring_there(flags):
    rows = [_row("f32", "float32", 4.0), _row("i8", "int8", 5.0)]
    (here,) = int8_notes(rows, _env(flags))
    (there,) = int8_notes(rows, _env(flags), on_device=True)
    assert here.endswith("Measure on the target device before deciding.")
    assert "Measure on the target device" not in there
    assert there == here.removesuffix(" Measure on the target device before deciding.")


def test_int8_notes_need_a_float_sibling_on_the_same_backend():
    rows = [_row("f32", "float32", 4.0, backend="keras"), _row("i8", "int8", 2.0)]
    assert int8_notes(rows, _env(())) == []


def test_recipe_notes_cover_int16x8_float16_and_dynamic_with_the_delegates_share():
    import dataclasses

    slow = dataclasses.replace(
        _row("i16", "int16x8", 148.0), details={"ops": 12, "delegated_ops": 1}
    )
    rows = [
        _row("f32", "float32", 4.0),
        slow,
        _row("f16", "float16", 4.05),
        _row("dyn", "dynamic", 3.0),
        _row("i8", "int8", 2.0),  # int8 has its own notes
    ]
    notes = {note.split(" ")[0]: note for note in recipe_notes(rows)}
    assert set(notes) == {"i16", "f16", "dyn"}
    assert "slower than float32 (0.03x of its speed; 37.0x the time)" in notes["i16"]
    assert "XNNPACK has no kernels for 16-bit activations" in notes["i16"]
    assert "the delegate ran 1 of its 12 ops" in notes["i16"]
    assert "as fast as float32" in notes["f16"] and "delegate ran" not in notes["f16"]
    assert "faster than float32 (1.33x" in notes["dyn"]


def test_current_rss_follows_an_allocation_and_peak_only_grows():
    from tfcompress.bench.memory import current_rss_mb, growth_mb, peak_rss_mb

    before = current_rss_mb()
    if before is None:
        pytest.skip("no /proc/self/statm and no psutil here")
    block = np.ones(64 << 20, np.uint8)  # 64 MiB, every page touched
    grown = growth_mb(before, current_rss_mb())
    assert 60 <= grown <= 80, grown
    peak = peak_rss_mb()
    del block
    assert growth_mb(before, current_rss_mb()) < 16  # freed: resident memory falls back
    assert peak_rss_mb() >= peak  # the high-water mark never does


def test_side_by_side_fills_a_lost_devices_cells_in_the_measured_lines():
    # A device lost before it measured has rows with no setting: they fill that device's
    # cells of the settings the others measured, not lines of their own.
    from dataclasses import replace

    from tfcompress.bench.result import BenchmarkResult, Device

    env = _env(())
    ok = [replace(_row(n, p, ms), device="pi-a") for n, p, ms in [("f32", "float32", 4.0)]]
    lost = BenchmarkRow("f32", "cpu", None, None, "error: device pi-b left", device="pi-b")
    devices = tuple(Device(n, "", n, "python", env) for n in ("pi-a", "pi-b"))
    result = BenchmarkResult((*ok, lost), env, {}, devices=devices)
    table = result.side_by_side().splitlines()
    assert len(table) == 3, table  # header, rule, one line
    assert "4.000" in table[2] and "error" in table[2]
