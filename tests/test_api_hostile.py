"""Every public callable, given hostile arguments: it answers, or refuses with a documented error.

The contract (docs/api.md, "Errors"): an argument of the wrong type raises ``TypeError`` naming
the parameter (kvplan's ``ArgumentTypeError``, also a ``UnitError``); a value of the right type
that cannot be used raises a ``KvplanError``; nothing else escapes (no ``AttributeError``,
``ZeroDivisionError``, ``OverflowError``, ``IndexError``, ``AssertionError``).

Each public function and each class a caller builds is called with a table of valid arguments,
then with every hostile value in place of each parameter in turn, the others left valid. The
table is fixed (no randomness), files live under a temporary folder that is also the working
directory (so ``"x"`` as a path names nothing outside it), and each call is bounded in time.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import importlib.util
import inspect
import math
import os
import shutil
import signal
import sys
import time
import types
import typing
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

import kvplan
from kvplan.errors import ArgumentTypeError, KvplanError

HERE = Path(__file__).parent
#: Seconds one call may take before it counts as a hang.
CALL_SECONDS = 5

TINY_SPEC = """\
name: tiny
num_hidden_layers: 2
num_attention_heads: 2
num_key_value_heads: 2
head_dim: 4
torch_dtype: float32
"""
BUDGET = """\
deployments:
  - name: chat
    model: llama-3.1-8b
    gpu: h100
    max_model_len: 8K
    expect:
      fits: true
"""


class _Slow(BaseException):
    """Raised by the alarm in a call that runs past CALL_SECONDS (a BaseException, so no
    ``except Exception`` in kvplan swallows it)."""


@dataclasses.dataclass(frozen=True)
class World:
    """What the valid calls need: files under ``folder`` and objects built from them."""

    folder: Path
    spec: kvplan.ModelSpec
    gpu: kvplan.GPU
    values: dict[str, dict[str, Any]]


def _hostile(world: World) -> list[object]:
    """The hostile values, each tried in place of every parameter."""
    return [
        None,
        "",
        "x",
        -1,
        0,
        2**64,
        10**400,
        math.nan,
        math.inf,
        1.5,
        True,
        [],
        {},
        object(),
        b"h100",  # bytes: a sequence of ints, never of counts, and no name
        "spec\x00.yaml",  # a NUL byte, which no path holds
        world.gpu,  # a GPU where a spec or a count goes
        world.spec,  # a spec where a GPU or a count goes
    ]


def _fields(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.init}


def _valid(folder: Path) -> World:
    """Valid arguments for every public callable that is called here."""
    _write_files(folder)
    spec = kvplan.load_model("llama-3.1-8b")
    gpu = kvplan.find_gpu("h100")
    values = {**_function_arguments(folder, spec, gpu), **_class_arguments(gpu)}
    return World(folder, spec, gpu, values)


def _write_files(folder: Path) -> None:
    (folder / "spec.yaml").write_text(TINY_SPEC)
    (folder / "new.yaml").write_text(TINY_SPEC.replace("layers: 2", "layers: 3"))
    (folder / "budget.yaml").write_text(BUDGET)
    (folder / "lengths.jsonl").write_text('{"prompt_tokens": 100, "output_tokens": 20}\n')
    (folder / "trace.jsonl").write_text(
        '{"timestamp": 0, "input_length": 600, "output_length": 10, "hash_ids": [1, 2]}\n'
        '{"timestamp": 5, "input_length": 700, "output_length": 10, "hash_ids": [1, 3]}\n'
    )
    (folder / "hf").mkdir()
    shutil.copy(HERE / "fixtures/hf/llama-3.1-8b/config.json", folder / "hf/config.json")
    shutil.copy(HERE / "data/logs/vllm-0.19-llama-3.1-8b-tp1.log", folder / "vllm.log")
    shutil.copy(HERE / "data/calibration-h100-sxm-0.32.yaml", folder / "calibration.yaml")


#: The smallest spec a caller could write by hand.
TINY = {
    "name": "t",
    "num_hidden_layers": 1,
    "num_attention_heads": 1,
    "head_dim": 2,
    "torch_dtype": "float16",
}


def _function_arguments(
    folder: Path, spec: kvplan.ModelSpec, gpu: kvplan.GPU
) -> dict[str, dict[str, Any]]:
    budget, budget_text = kvplan.load_budget(folder / "budget.yaml")
    return {
        "alternatives": {"spec": spec, "gpu": gpu, "context_tokens": 1024},
        "bytes_per_token": {"spec": spec},
        "cache_dtypes": {"spec": spec},
        "calibrate": {"logs": [("a", (folder / "vllm.log").read_text())] * 3},
        "check_budget": {"budget": budget, "text": budget_text, "path": "budget.yaml"},
        "compare": {"models": [spec], "context_tokens": 1024, "gpu": gpu},
        "custom_gpu": {"memory_bytes": 16 * 2**30},
        "diff_files": {"old": "spec.yaml", "new": "new.yaml"},
        "estimate": {"spec": spec, "context_tokens": 1024},
        "estimate_overhead": {"spec": spec},
        "explain": {"est": kvplan.estimate(spec, 1024)},
        "find_gpu": {"name": "h100"},
        "find_system": {"name": "hgx-h100"},
        "format_bytes": {"num_bytes": 1024},
        "import_config": {"path": "hf/config.json"},
        "is_cluster_question": {"gpu": gpu},
        "json_schema": {"kind": "spec"},
        "list_architectures": {},
        "list_gpus": {},
        "list_models": {},
        "list_prices": {},
        "list_systems": {},
        "llamacpp_kv_cache": {"spec": spec, "n_ctx": 1024},
        "load_budget": {"path": "budget.yaml"},
        "load_calibration": {"path": "calibration.yaml"},
        "load_lengths": {"path": "lengths.jsonl"},
        "load_model": {"model": "llama-3.1-8b"},
        "load_spec": {"path": "spec.yaml"},
        "memory_curve": {"spec": spec, "contexts": [1024, 2048]},
        "model_weights": {"spec": spec},
        "parse_bytes": {"text": "1GiB"},
        "parse_spec": {"data": TINY},
        "parse_tokens": {"text": "1K"},
        "perf": {"spec": spec, "gpu": gpu, "context_tokens": 1024},
        "pipeline_partition": {"num_layers": 32, "pipeline_parallel_size": 2},
        "plan": {"spec": spec, "gpu": gpu, "max_model_len": 4096},
        "plan_cluster": {
            "spec": spec,
            "gpu": gpu,
            "max_model_len": 4096,
            "concurrency": 4,
            "top": 1,
        },
        "plan_deployment": {"spec": spec, "gpu": gpu, "max_model_len": 4096, "concurrency": 4},
        "read_log": {"path": "vllm.log"},
        "recommend": {"spec": spec, "gpu": gpu, "max_model_len": 4096, "concurrency": 2},
        "reconcile": {"text": (folder / "vllm.log").read_text()},
        "reload_vs_recompute": {"spec": spec, "gpu": gpu, "max_tokens": 4096},
        "replay_trace": {"spec": spec, "gpu": gpu, "path": "trace.jsonl"},
        "hit_rate_curve": {"spec": spec, "gpu": gpu, "path": "trace.jsonl"},
        "resolve_dtype": {"name": "bfloat16"},
        "run_probe": {"spec": "spec.yaml", "context_tokens": 16},
        "sglang_kv_cache": {"spec": spec, "gpu": gpu},
        "tgi_kv_cache": {"spec": spec, "gpu": gpu, "free_bytes_after_warmup": 16 * 2**30},
        "tier_capacity": {"spec": spec, "gpu": gpu, "max_model_len": 4096},
        "transformers_kv_cache": {"spec": spec, "context_tokens": 1024},
        "trtllm_kv_cache": {"spec": spec, "gpu": gpu},
        "vllm_config": {"max_model_len": 4096},
        "vllm_profile": {"spec": spec, "gpu": gpu, "cfg": kvplan.vllm_config(4096)},
    }


def _class_arguments(gpu: kvplan.GPU) -> dict[str, dict[str, Any]]:
    """The classes a caller builds."""
    heads = {"num_kv_heads": 8, "head_dim": 128, "v_head_dim": 128}
    bf16 = kvplan.resolve_dtype("bfloat16")
    return {
        "ChunkedLocalAttention": {**heads, "chunk": 8192},
        "Calibration": {"gpu": "h100-sxm", "version_line": "0.32"},
        "DType": {"name": "custom", "block_values": 32, "block_bytes": 18},
        "FullAttention": heads,
        "GPU": _fields(gpu),
        "MLALatent": {"kv_lora_rank": 512, "qk_rope_head_dim": 64},
        "ModelSpec": TINY,
        "NoCache": {},
        "RecurrentState": {
            "kind": "mamba",
            "conv_values": 24576,
            "ssm_values": 131072,
            "state_dtype": bf16,
        },
        "SlidingWindowAttention": {**heads, "window": 4096},
        "System": _fields(kvplan.find_system("hgx-h100")),
        "VllmConfig": _fields(kvplan.vllm_config(4096)),
        "TierSize": {"name": "host", "size_bytes": 2**30},
    }


#: Public classes that kvplan builds and returns: a caller reads them, never builds them, so
#: their constructors take what kvplan gives them and are not called here.
RESULTS = {
    "Alternative",
    "Architecture",
    "AssertionResult",
    "Budget",
    "CacheDTypes",
    "CalibrationFit",
    "Candidate",
    "ClusterPlan",
    "Comparison",
    "CurvePoint",
    "DecodeStep",
    "Diff",
    "EngineFlags",
    "EngineResult",
    "Estimate",
    "Imported",
    "LayerBreakdown",
    "LengthMix",
    "Overhead",
    "Perf",
    "Plan",
    "Prefill",
    "Price",
    "ProbeResult",
    "Reconciliation",
    "ReloadVsRecompute",
    "StagePlan",
    "TierCapacity",
    "TraceReplay",
    "VllmResult",
    "Weights",
}
#: A Protocol, not a class to build.
PROTOCOLS = {"LayerCache"}
#: The errors: raised by kvplan, not called with arguments.
ERRORS = {
    "HubUnavailableError",
    "KvplanError",
    "ModelNotFoundError",
    "ProbeUnavailableError",
    "SpecError",
    "UnavailableError",
    "UnitError",
    "UnknownEngineError",
    "UnknownGPUError",
    "UnknownSystemError",
}
#: ``**kwargs`` parameters, tried by these names.
KEYWORDS = {
    "vllm_config": (
        "block_size",
        "tensor_parallel_size",
        "kv_cache_dtype",
        "max_num_seqs",
        "enable_prefix_caching",
        "version",
    ),
}
#: Where a TypeError names what the value is rather than the parameter: parse_tokens and
#: parse_bytes say "token count" and "memory size", the words a budget file's errors show
#: under the key's own name.
NAMED_AS = {("parse_tokens", "text"): "token count", ("parse_bytes", "text"): "memory size"}
#: Types taken beyond the annotation: VllmConfig reads its utilization as vllm_config does.
ALSO_TAKES: dict[tuple[str, str], tuple[type, ...]] = {
    ("VllmConfig", "gpu_memory_utilization"): (Fraction, int, float, str),
}
#: Parameters whose wrong types are refused with another documented error, on purpose:
#: ModelSpec is checked as a spec file is (SpecError naming the key).
TYPE_AS_SPEC_ERROR = {"ModelSpec"}
#: Functions that need an optional dependency for anything past their argument checks.
NEEDS = {"run_probe": "torch"}

#: Known failures, each with why: none now. A case that must wait for a fix elsewhere goes
#: here as ``(kind, function, parameter): reason``, and fails the suite once it passes.
KNOWN: dict[tuple[str, str, str], str] = {}


def _callables() -> set[str]:
    return {name for name in kvplan.__all__ if callable(getattr(kvplan, name))}


def _parameters(name: str) -> list[str]:
    fn = getattr(kvplan, name)
    kinds = (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)
    found = [p.name for p in inspect.signature(fn).parameters.values() if p.kind not in kinds]
    return found + list(KEYWORDS.get(name, ()))


CALLED = sorted(_callables() - RESULTS - PROTOCOLS - ERRORS)
CASES = [(name, parameter) for name in CALLED for parameter in _parameters(name)]


def _cases(kind: str) -> list[Any]:
    marked = []
    for name, parameter in CASES:
        if kind == "typed" and name in TYPE_AS_SPEC_ERROR:
            continue
        reason = KNOWN.get((kind, name, parameter))
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        marked.append(pytest.param(name, parameter, marks=marks, id=f"{name}-{parameter}"))
    return marked


# --- the calls ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    folder = tmp_path_factory.mktemp("hostile")
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield _valid(folder)
    finally:
        os.chdir(before)


def _alarm(signum: int, frame: object) -> None:
    raise _Slow


def _call(fn: Callable[..., object], kwargs: dict[str, Any]) -> BaseException | None:
    """``fn(**kwargs)``: None when it returns, else what it raised; at most CALL_SECONDS."""
    timed = hasattr(signal, "setitimer")
    if timed:
        previous = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, CALL_SECONDS)
    start = time.perf_counter()
    try:
        fn(**kwargs)
    except (Exception, _Slow) as e:  # what escapes is what is checked
        return e
    finally:
        if timed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous or signal.SIG_DFL)
    if time.perf_counter() - start > CALL_SECONDS:
        return _Slow()
    return None


def _named(name: str, parameter: str) -> str:
    return NAMED_AS.get((name, parameter), parameter)


def _problem(name: str, parameter: str, value: object, error: BaseException | None) -> str | None:
    """Why the outcome breaks the contract, or None."""
    if error is None or (isinstance(error, KvplanError) and not isinstance(error, TypeError)):
        return None
    if isinstance(error, _Slow):
        return f"{parameter}={_shown(value)}: took over {CALL_SECONDS} s"
    if isinstance(error, TypeError):
        if _named(name, parameter) in str(error):
            return None
        return f"{parameter}={_shown(value)}: TypeError without the parameter: {error}"
    return f"{parameter}={_shown(value)}: {type(error).__name__}: {error}"


def _shown(value: object) -> str:
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**20 else "a huge int"
    return text if len(text) <= 30 else text[:27] + "..."


def _needs(name: str) -> str | None:
    """The optional module ``name`` needs and does not find here, or None."""
    module = NEEDS.get(name)
    return module if module and importlib.util.find_spec(module) is None else None


def _outcomes(world: World, name: str, parameter: str) -> Iterator[tuple[object, Any]]:
    fn = getattr(kvplan, name)
    for value in _hostile(world):
        if NEEDS.get(name) and not _needs(name) and _takes(name, parameter, value):
            continue  # with the dependency installed, only the cheap refusals are run
        yield value, _call(fn, {**world.values[name], parameter: value})


# --- the types each parameter takes ------------------------------------------------------------


def _namespace(fn: Any) -> dict[str, Any]:
    """Names an annotation of ``fn`` may use that its module imports only for type checking:
    the public classes of every kvplan module loaded, where ``fn``'s module lacks them."""
    pool: dict[str, Any] = {}
    for module_name, module in sorted(sys.modules.items()):
        if module_name.startswith("kvplan") and module is not None:
            for attribute, value in vars(module).items():
                if not attribute.startswith("_") and not inspect.ismodule(value):
                    pool.setdefault(attribute, value)
    own = getattr(fn, "__globals__", {})
    return {name: value for name, value in pool.items() if name not in own}


def _accepted(annotation: Any) -> tuple[type, ...] | None:
    """The runtime types an annotation admits, or None when it admits anything (or is not
    read here)."""
    origin = typing.get_origin(annotation)
    if annotation in (Any, object):
        return None
    if origin in (typing.Union, types.UnionType):
        parts = [_accepted(arg) for arg in typing.get_args(annotation)]
        return None if any(p is None for p in parts) else tuple(t for p in parts for t in p or ())
    if origin is typing.Literal:
        return tuple({type(arg) for arg in typing.get_args(annotation)})
    if origin is typing.Annotated:
        return _accepted(typing.get_args(annotation)[0])
    if origin in (collections.abc.Sequence, list, tuple):
        return (list, tuple) if origin is collections.abc.Sequence else (origin,)
    if origin in (collections.abc.Mapping, dict):
        return (dict,)
    if annotation is float:
        return (float, int)
    if annotation is Fraction:
        return (Fraction, int, float)
    if annotation is type(None) or isinstance(annotation, type):
        return (annotation,)
    return None


@functools.cache
def _types(name: str) -> dict[str, tuple[type, ...] | None]:
    fn = getattr(kvplan, name)
    target = fn.__init__ if isinstance(fn, type) else fn
    localns = _namespace(target)
    found: dict[str, tuple[type, ...] | None] = {}
    for parameter, annotation in getattr(target, "__annotations__", {}).items():
        try:
            hint = typing.get_type_hints(
                types.SimpleNamespace(__annotations__={parameter: annotation}),
                globalns=getattr(target, "__globals__", {}),
                localns=localns,
                include_extras=True,
            )[parameter]
        except (NameError, TypeError, AttributeError):
            hint = Any  # not read here: every type taken
        found[parameter] = ALSO_TAKES.get((name, parameter)) or _accepted(hint)
    return found


def _takes(name: str, parameter: str, value: object) -> bool:
    """Whether ``value``'s type is one ``parameter`` takes (unknown: taken)."""
    accepted = _types(name).get(parameter)
    if accepted is None:
        return True
    if isinstance(value, bool):
        return bool in accepted
    return isinstance(value, accepted)


# --- the tests ---------------------------------------------------------------------------------


def test_every_public_callable_is_called_or_listed(world: World) -> None:
    """A new public name must join the table of valid calls, or say why it is not called."""
    assert set(world.values) == set(CALLED)
    assert not RESULTS & PROTOCOLS & ERRORS
    for name in ERRORS:
        assert issubclass(getattr(kvplan, name), KvplanError)
    for name in RESULTS:
        assert isinstance(getattr(kvplan, name), type)


def test_the_valid_calls_answer(world: World) -> None:
    for name in CALLED:
        if name in NEEDS:
            continue  # the probe's own tests run it; here it is given only what it refuses
        error = _call(getattr(kvplan, name), world.values[name])
        assert error is None, f"{name}: {type(error).__name__}: {error}"


@pytest.mark.parametrize(("name", "parameter"), _cases("refused"))
def test_a_hostile_value_answers_or_is_refused(world: World, name: str, parameter: str) -> None:
    problems = [
        found
        for value, error in _outcomes(world, name, parameter)
        if (found := _problem(name, parameter, value, error)) is not None
    ]
    assert not problems, f"{name}:\n" + "\n".join(problems)


@pytest.mark.parametrize(("name", "parameter"), _cases("typed"))
def test_a_wrong_type_is_a_type_error(world: World, name: str, parameter: str) -> None:
    problems = []
    for value, error in _outcomes(world, name, parameter):
        if _takes(name, parameter, value):
            continue
        if not isinstance(error, TypeError) or _named(name, parameter) not in str(error):
            got = "nothing" if error is None else f"{type(error).__name__}: {error}"
            problems.append(f"{parameter}={_shown(value)}: {got}")
    assert not problems, f"{name}:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    ("call", "kind"),
    [
        (lambda: kvplan.pipeline_partition(32, 0), kvplan.UnitError),
        (
            lambda: kvplan.estimate_overhead("llama-3.1-8b", tensor_parallel_size=0),
            kvplan.UnitError,
        ),
        (
            lambda: kvplan.recommend("llama-3.1-8b", "h100", max_model_len=10**400, concurrency=1),
            kvplan.UnitError,
        ),
        (lambda: kvplan.load_spec(10**400), TypeError),
        (
            lambda: kvplan.plan_cluster("llama-3.1-8b", [], max_model_len=1024, concurrency=1),
            kvplan.UnitError,
        ),
        (lambda: kvplan.format_bytes(float("nan")), TypeError),  # type: ignore[arg-type]
        (lambda: kvplan.vllm_profile(5, "h100", kvplan.vllm_config(1024)), TypeError),  # type: ignore[arg-type]
    ],
    ids=["pp 0", "tp 0", "10**400 tokens", "int path", "no GPU", "nan bytes", "int spec"],
)
def test_the_reported_cases(call: Callable[[], object], kind: type[Exception]) -> None:
    with pytest.raises(kind):
        call()


def test_a_type_error_is_also_a_kvplan_error() -> None:
    with pytest.raises(ArgumentTypeError) as caught:
        kvplan.vllm_profile(5, "h100", kvplan.vllm_config(1024))  # type: ignore[arg-type]
    assert isinstance(caught.value, TypeError)
    assert isinstance(caught.value, kvplan.UnitError)
    assert str(caught.value) == "spec: expected a ModelSpec or a model's name, got int"
