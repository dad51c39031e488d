"""SGLang's automatic mem_fraction_static per release line, derived by hand from each release."""

import pytest

from kvplan.engines.sglang_memory import mem_fraction_static_auto
from kvplan.engines.sglang_versions import resolve_sglang_version
from kvplan.errors import UnknownEngineError

MIB = 2**20
H100 = 81090 * MIB
H200 = 143771 * MIB


@pytest.mark.parametrize(
    ("gpu", "tp", "version", "expected"),
    [
        pytest.param(H100, 1, "0.4.6.post5", 0.88, id="0.4.6 H100 tp1: table 0.88"),
        pytest.param(H100, 8, "0.4.6", 0.81, id="0.4.6 H100 tp8: table 0.81"),
        pytest.param(
            H200, 1, "0.4.6", 125339 / 143771, id="0.4.6 H200: min(0.921, (143771-18432)/143771)"
        ),
        pytest.param(183000 * MIB, 1, "0.4.7", 0.79, id="0.4.7 over 180,000 MiB: 0.79"),
        pytest.param(H100, 1, "0.4.10.post2", 0.874, id="0.5.2 line: (81090-10240)/81090"),
        pytest.param(H100, 8, "0.5.1", 0.83, id="0.5.2 line tp8: (81090-13824)/81090"),
        pytest.param(H200, 1, "0.5.2", 0.911, id="0.5.2 line H200: (143771-12800)/143771"),
        pytest.param(H100, 1, None, 0.834, id="default 0.5.9: 512+12288+512+128=13440"),
    ],
)
def test_fraction_per_line(gpu: int, tp: int, version: str | None, expected: float) -> None:
    assert mem_fraction_static_auto(gpu, tp=tp, version=version) == pytest.approx(expected)


def test_speculative_reserve_0_5_2_line() -> None:
    # (9.5 + 0.5) x 1024 + 2048 = 12,288 MiB -> (81090 - 12288) / 81090 = 0.848
    got = mem_fraction_static_auto(H100, version="0.5.0", speculative_algorithm="EAGLE")
    assert got == 0.848


@pytest.mark.parametrize(
    ("asked", "line", "noted"),
    [
        ("0.4.6.post5", "0.4.6", False),
        ("v0.5.3", "0.5.9", False),
        ("0.5.4rc1", "0.5.9", True),
        ("0.5.23", "0.5.9", True),
        ("0.3.6", "0.4.6", True),
        (None, "0.5.9", False),
    ],
)
def test_resolve(asked: str | None, line: str, noted: bool) -> None:
    choice = resolve_sglang_version(asked)
    assert choice.line == line
    assert bool(choice.note) == noted


@pytest.mark.parametrize("garbage", ["latest", "0.x", ""])
def test_garbage_raises(garbage: str) -> None:
    with pytest.raises(UnknownEngineError, match="SGLang version"):
        resolve_sglang_version(garbage)
