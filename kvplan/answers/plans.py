"""A ``Question`` asked of one engine by name, answered from that engine's rules.

``answer(spec, gpu, question)`` -> ``Answer``: the engine's own result (``ideal`` ->
``planner.Plan`` or, for the fewest GPUs on a catalog system, ``ClusterPlan``; ``vllm`` ->
``VllmPlan``; ``sglang``, ``trtllm`` -> ``TokenPoolPlan``; ``llama.cpp`` -> ``LlamaCppPlan``)
and one ``Verdict`` of the same shape for every engine: the kind of question, the most
requests at the context, the longest context at the concurrency, the GPUs, and ``fits``.

Every engine takes every kind of question (``kvplan.answers.question``): the most requests of a
length; the longest context for a number of requests; whether both fit with ``-tp``; and, with
no parallel size, the fewest GPUs (tensor parallel sizes the heads allow, up to a node, then
replicas). A setting an engine does not read is refused before anything is computed
(``question.refuse_unread``), and so is a length past the model's trained length where the
engine itself refuses it.
A new engine flag is one field of ``Question``, one entry of ``ENGINE_SETTINGS`` and one
argument where the engine is called.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from kvplan.answers.lora import sglang_lora, vllm_lora
from kvplan.answers.question import (
    Kind,
    Question,
    length_problem,
    refuse_past_trained_length,
    refuse_unread,
    trained_length,
    with_trained_length,
)
from kvplan.errors import UnitError, UnknownEngineError

if TYPE_CHECKING:
    from kvplan.engines.base import EngineResult
    from kvplan.engines.vllm import StageResult, VllmResult
    from kvplan.engines.vllm_speculative import Speculative
    from kvplan.hardware.gpus import GPU
    from kvplan.model.spec import ModelSpec
    from kvplan.planner.cluster import ClusterPlan

#: the engines ``answer`` models
PLAN_ENGINES = ("ideal", "vllm", "sglang", "trtllm", "llama.cpp")


@dataclass(frozen=True, slots=True)
class VllmPlan:
    """vLLM's start-up for a deployment, with the figures ``kvplan plan`` adds to it.

    ``max_context_tokens``: the longest request that fits, as vLLM estimates it.
    """

    model: str
    gpu: GPU
    result: VllmResult
    max_context_tokens: int
    version_asked: str = ""
    version_note: str = ""
    kv_cache_dtype: str = (
        ""  # the cache dtype vLLM resolves (``--kv-cache-dtype auto``: the model's)
    )

    @property
    def num_gpus(self) -> int:
        cfg = self.result.config
        return cfg.tensor_parallel_size * cfg.pipeline_parallel_size

    @property
    def tightest_stage(self) -> StageResult:
        """The (first) stage with the fewest blocks: it sets the pool."""
        return min(self.result.stages, key=lambda s: s.num_blocks)

    @property
    def overhead_bytes(self) -> int:
        """Peak activation, non-torch memory and (from vLLM v0.21.0) the CUDA-graph estimate
        of the tightest stage."""
        o = self.tightest_stage.overhead
        return o.activation_bytes + o.non_torch_bytes + o.cuda_graph_bytes

    @property
    def max_concurrency(self) -> int:
        return self.result.max_requests

    @property
    def fits(self) -> bool:
        r = self.result
        return r.fit_blocks >= r.blocks_per_request and r.fit_blocks > 0


@dataclass(frozen=True, slots=True)
class TokenPoolPlan:
    """SGLang's or TensorRT-LLM's token pool, and how many requests of ``max_model_len`` it
    holds. ``free_gpu_memory_fraction``: TensorRT-LLM's, with its dry run's peak taken as the
    weights; None for SGLang."""

    result: EngineResult
    gpu: GPU
    tensor_parallel_size: int
    pipeline_parallel_size: int
    max_model_len: int
    free_gpu_memory_fraction: float | None = None

    @property
    def kv_cache_tokens(self) -> int:
        return self.result.kv_cache_tokens or 0

    @property
    def block_size(self) -> int:
        """The pool's unit in tokens: SGLang's page, TensorRT-LLM's block (32)."""
        return self.result.block_size or 1

    @property
    def num_blocks(self) -> int:
        return self.kv_cache_tokens // self.block_size

    def requests_at(self, num_tokens: int) -> int:
        """Requests of ``num_tokens`` each the pool holds, in whole pages or blocks."""
        if num_tokens <= 0:
            return 0
        return self.num_blocks // -(-num_tokens // self.block_size)

    def longest_for(self, concurrency: int) -> int:
        """The longest context ``concurrency`` requests each reach, in whole pages or blocks."""
        return (self.num_blocks // concurrency) * self.block_size if concurrency > 0 else 0

    @property
    def max_concurrency(self) -> int:
        return self.requests_at(self.max_model_len)

    @property
    def fits(self) -> bool:
        return self.max_concurrency >= 1


#: the widest tensor parallel size the fewest-GPU search of an engine tries (one node)
MAX_ENGINE_TP = 8


@dataclass(frozen=True, slots=True)
class Verdict:
    """The answer to a ``Question``, the same for every engine.

    ``max_model_len``: tokens each request holds in the answer (for ``max_context``, the
    longest context found); ``max_concurrency``: requests of ``max_model_len`` one replica
    holds; ``max_context_tokens``: the longest context ``concurrency`` requests each reach
    (None when no concurrency was asked); ``replicas`` copies of ``tensor_parallel_size x
    pipeline_parallel_size`` GPUs; ``fits``: the question has an answer (a request fits, the
    concurrency asked is held); ``warnings``: what the user should know (a length past the
    trained one).
    """

    engine: str
    kind: Kind
    max_model_len: int
    concurrency: int | None
    max_concurrency: int
    max_context_tokens: int | None
    fits: bool
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    replicas: int = 1
    limit: str = ""  # what caps the answer besides memory (vLLM's --max-num-seqs)
    warnings: tuple[str, ...] = ()

    @property
    def num_gpus(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.replicas

    @property
    def held_requests(self) -> int:
        return self.max_concurrency * self.replicas

    def sentence(self) -> str:
        """The verdict in one sentence, naming what was asked."""
        from kvplan.units import format_tokens

        length = f"{format_tokens(self.max_model_len)} tokens"
        asked = f"{self.concurrency} request{'s' if self.concurrency != 1 else ''}"
        shape = f"TP {self.tensor_parallel_size} x PP {self.pipeline_parallel_size}"
        gpus = f"{self.num_gpus} GPU{'s' if self.num_gpus != 1 else ''} ({shape}"
        gpus += f" x {self.replicas} replicas)" if self.replicas > 1 else ")"
        match self.kind:
            case "max_context":
                if not self.fits:
                    return f"{self.concurrency} requests do not fit on {gpus} at any context"
                return f"{self.concurrency} concurrent requests reach {length} each on {gpus}"
            case "fewest_gpus" if self.fits:
                return (
                    f"fewest GPUs: {gpus} hold {self.held_requests} requests of {length}"
                    f" (>= {self.concurrency})"
                )
            case "fewest_gpus":
                return (
                    f"{asked} of {length} do not fit on up to {MAX_ENGINE_TP} GPUs in tensor"
                    " parallel"
                )
            case "fits":
                one = self.concurrency == 1
                verb = (
                    ("fits" if one else "fit")
                    if self.fits
                    else ("does not fit" if one else "do not fit")
                )
                held = f"it holds {self.max_concurrency}" + (
                    f"; {self.limit}" if self.limit else ""
                )
                return f"{asked} of {length} {verb} on {gpus}; {held}"
        if not self.fits:
            return f"one request of {length} does not fit on {gpus}"
        limit = f": {self.limit}" if self.limit else ""
        return f"{self.max_concurrency} concurrent requests of {length} fit on {gpus}{limit}"


@dataclass(frozen=True, slots=True)
class Answer:
    """An engine's result for a question, and the verdict every engine gives alike."""

    #: Plan | ClusterPlan (ideal), VllmPlan, TokenPoolPlan (sglang, trtllm), LlamaCppPlan
    result: Any
    verdict: Verdict

    @property
    def fits(self) -> bool:
        return self.verdict.fits


def answer(spec: ModelSpec, gpu: GPU, q: Question) -> Answer:
    """``q`` asked of ``q.engine`` on ``gpu`` (the module docstring).

    Raises UnitError for a setting the engine does not read or a length it refuses, and
    UnknownEngineError for an engine without a plan profile."""
    _known(q.engine)
    refuse_unread(q)
    refuse_past_trained_length(spec, q)
    spec = with_trained_length(spec, q)
    warnings = tuple(w for w in (length_problem(spec, q, q.max_model_len),) if w)
    match q.engine:
        case "ideal":
            found = _ideal(spec, gpu, q)
        case "llama.cpp":
            found = _llamacpp(spec, gpu, q)
        case _:
            found = _searched(spec, gpu, q)
    result, verdict = found
    return Answer(result, replace(verdict, warnings=verdict.warnings + warnings))


def _known(engine: str) -> None:
    if engine in PLAN_ENGINES:
        return
    modelled = ", ".join(PLAN_ENGINES)
    from kvplan.engines.base import ENGINE_NAMES

    if engine in ENGINE_NAMES:
        raise UnknownEngineError(
            f"--engine {engine}: its plan profile is not modelled yet; modelled: {modelled}"
        )
    raise UnknownEngineError(f"--engine: unknown engine {engine!r}; modelled: {modelled}")


# --- kvplan's own planner -------------------------------------------------------------------


def _ideal(spec: ModelSpec, gpu: GPU, q: Question) -> tuple[Any, Verdict]:
    from kvplan.planner.cluster_route import plan_deployment

    kwargs: dict[str, Any] = {
        "tensor_parallel_size": q.tensor_parallel_size,
        "pipeline_parallel_size": q.pipeline_parallel_size,
        "max_model_len": q.max_model_len,
        "concurrency": q.concurrency,
        "kv_cache_dtype": q.kv_cache_dtype,
        "dtype": q.dtype,
        "quantization": q.quantization,
        "overhead_bytes": q.overhead_bytes,
        "kv_cache_memory_bytes": q.kv_cache_memory_bytes,
        "shared_prefix_tokens": q.shared_prefix_tokens,
        "lengths": q.lengths,
        "mean_length": q.mean_length,
        "p99_length": q.p99_length,
    }
    for name in ("gpu_memory_utilization", "block_size", "max_num_batched_tokens"):
        if getattr(q, name) is not None:
            kwargs[name] = getattr(q, name)
    found = plan_deployment(spec, gpu, **kwargs)
    from kvplan.planner.cluster import ClusterPlan

    if isinstance(found, ClusterPlan):
        return found, cluster_verdict(found)
    p = found
    kind = q.kind
    if kind == "fewest_gpus":
        kind = "fewest_gpus" if p.searched else "fits"
    length = p.max_model_len if p.max_model_len is not None else (p.max_context_tokens or 0)
    return p, Verdict(
        engine="ideal",
        kind=kind,
        max_model_len=length,
        concurrency=p.concurrency,
        max_concurrency=p.max_concurrency or 0,
        max_context_tokens=p.max_context_tokens if q.concurrency is not None else None,
        fits=p.fits,
        tensor_parallel_size=p.tensor_parallel_size,
        pipeline_parallel_size=p.pipeline_parallel_size,
        replicas=p.replicas,
    )


def cluster_verdict(cp: ClusterPlan) -> Verdict:
    """The verdict of the search in whole nodes: its first candidate."""
    best = cp.best
    if best is None:
        return Verdict("ideal", "fewest_gpus", cp.max_model_len, cp.concurrency, 0, None, False)
    p = best.plan
    return Verdict(
        engine="ideal",
        kind="fewest_gpus",
        max_model_len=cp.max_model_len,
        concurrency=cp.concurrency,
        max_concurrency=p.max_concurrency or 0,
        max_context_tokens=None,
        fits=cp.fits,
        tensor_parallel_size=p.tensor_parallel_size,
        pipeline_parallel_size=p.pipeline_parallel_size,
        replicas=p.replicas,
    )


# --- engines with a pool: vLLM, SGLang, TensorRT-LLM ------------------------------------------


def _searched(spec: ModelSpec, gpu: GPU, q: Question) -> tuple[Any, Verdict]:
    """vLLM's, SGLang's or TensorRT-LLM's answer; the fewest GPUs by trying each tensor
    parallel size the heads allow (1, 2, 4, 8) with as many replicas as the requests need."""
    if q.kind != "fewest_gpus":
        return _pool_answer(spec, gpu, q)
    from kvplan.planner.search import valid_tensor_parallel_sizes

    tried: list[tuple[Any, Verdict]] = []
    for tp in valid_tensor_parallel_sizes(spec, MAX_ENGINE_TP):
        result, v = _pool_answer(spec, gpu, replace(q, tensor_parallel_size=tp))
        held = v.max_concurrency
        if held >= 1 and not v.limit:
            replicas = -(-(q.concurrency or 1) // held)
            tried.append((result, replace(v, kind="fewest_gpus", replicas=replicas, fits=True)))
    if not tried:
        result, v = _pool_answer(
            spec, gpu, replace(q, tensor_parallel_size=valid_tensor_parallel_sizes(spec)[-1])
        )
        return result, replace(v, kind="fewest_gpus", fits=False)
    return min(tried, key=lambda t: (t[1].num_gpus, t[1].replicas))


def _pool_answer(spec: ModelSpec, gpu: GPU, q: Question) -> tuple[Any, Verdict]:
    """One deployment of ``q``'s engine at ``q``'s parallel sizes: the requests of the
    context asked (or the trained length), or the longest context for the concurrency."""
    trained = trained_length(spec, q) or 0
    length = q.max_model_len or trained
    if q.engine == "vllm":
        return _vllm_answer(spec, gpu, q, length)
    pool = _token_pool(spec, gpu, q, length)
    if q.kind == "max_context":
        n = q.concurrency or 1
        longest = min(pool.longest_for(n), trained) if trained else pool.longest_for(n)
        return pool, _verdict(q, longest, pool.requests_at(longest) if longest else 0, longest)
    held = pool.max_concurrency
    return pool, _verdict(q, length, held, None)


def _verdict(q: Question, length: int, held: int, longest: int | None, limit: str = "") -> Verdict:
    """The verdict of one deployment holding ``held`` requests of ``length`` tokens."""
    n = q.concurrency
    match q.kind:
        case "max_context":
            fits = (longest or 0) > 0
        case "fits" | "fewest_gpus":
            fits = n is not None and held >= n and not limit
        case _:
            fits = held >= 1
    return Verdict(
        engine=q.engine,
        kind=q.kind,
        max_model_len=length,
        concurrency=n,
        max_concurrency=held,
        max_context_tokens=longest if n is not None else None,
        fits=fits,
        tensor_parallel_size=q.tensor_parallel_size or 1,
        pipeline_parallel_size=q.pipeline_parallel_size or 1,
        limit=limit,
    )


def _vllm_answer(spec: ModelSpec, gpu: GPU, q: Question, length: int) -> tuple[Any, Verdict]:
    from kvplan.engines import vllm

    plan = _vllm(spec, gpu, q, length)
    max_num_seqs = plan.result.config.num_seqs
    if q.kind == "max_context":
        n = q.concurrency or 1
        longest = vllm.estimated_max_model_len(plan.result, n)
        if longest > 0:
            plan = _vllm(spec, gpu, q, longest)
        limit = _seqs_limit(n, max_num_seqs)
        held = plan.result.max_requests if longest > 0 else 0
        verdict = _verdict(q, longest, held, longest, limit)
        return plan, replace(verdict, fits=longest > 0 and not limit)
    held = plan.result.max_requests
    if q.concurrency:
        return plan, _verdict(q, length, held, None, _seqs_limit(q.concurrency, max_num_seqs))
    if held <= max_num_seqs:
        return plan, _verdict(q, length, held, None, "")
    # the most requests at once: the pool may hold more than the scheduler runs
    limit = f"the pool holds {held:,}, but {_seqs_limit(held, max_num_seqs)}"
    return plan, _verdict(q, length, max_num_seqs, None, limit)


def _seqs_limit(concurrency: int | None, max_num_seqs: int) -> str:
    if concurrency is None or concurrency <= max_num_seqs:
        return ""
    return f"vLLM runs at most --max-num-seqs {max_num_seqs:,} requests at once"


def _speculative(text: str | None) -> Speculative | None:
    """``--speculative-config`` read as vLLM takes it; None without one."""
    if text is None:
        return None
    from kvplan.engines.vllm_speculative import parse_speculative_config

    return parse_speculative_config(text)


def _vllm(spec: ModelSpec, gpu: GPU, r: Question, length: int) -> VllmPlan:
    from kvplan.engines import vllm

    choice = vllm.resolve_version(r.version)
    optional = {
        name: getattr(r, name)
        for name in (
            "gpu_memory_utilization",
            "max_num_batched_tokens",
            "max_num_seqs",
            "block_size",
        )
        if getattr(r, name) is not None
    }
    cfg = vllm.VllmConfig(
        max_model_len=length,
        mamba_ssm_cache_dtype=r.mamba_ssm_cache_dtype,
        enable_prefix_caching=r.enable_prefix_caching,
        async_scheduling=r.async_scheduling,
        mamba_cache_mode=r.mamba_cache_mode,
        num_gpu_blocks_override=r.num_gpu_blocks_override,
        enforce_eager=bool(r.enforce_eager),
        limit_mm_per_prompt=r.limit_mm_per_prompt,
        language_model_only=bool(r.language_model_only),
        speculative=_speculative(r.speculative_config),
        lora=vllm_lora(r),
        calibration=r.calibration,
        kv_cache_dtype=r.kv_cache_dtype,
        kv_cache_memory_bytes=r.kv_cache_memory_bytes,
        tensor_parallel_size=r.tensor_parallel_size or 1,
        pipeline_parallel_size=r.pipeline_parallel_size or 1,
        dtype=r.dtype,
        quantization=r.quantization,
        version=choice.line,
        **optional,
    )
    from kvplan.model.dtypes import cache_dtypes

    result = vllm.profile(spec, gpu, cfg)
    kv = cache_dtypes(spec, "vllm", kv_cache_dtype=r.kv_cache_dtype, dtype=r.dtype)
    return VllmPlan(
        spec.name,
        gpu,
        result,
        vllm.estimated_max_model_len(result),
        choice.asked,
        choice.note,
        kv.kv_dtype + (f" ({kv.reason})" if kv.reason else ""),
    )


def _token_pool(spec: ModelSpec, gpu: GPU, q: Question, length: int) -> TokenPoolPlan:
    tp, pp = q.tensor_parallel_size or 1, q.pipeline_parallel_size or 1
    fraction = None
    if q.engine == "trtllm":
        from kvplan.engines import trtllm

        fraction = float(q.gpu_memory_utilization or Fraction(9, 10))
        result = trtllm.kv_cache(
            spec,
            gpu,
            tp=tp,
            pp=pp,
            free_gpu_memory_fraction=fraction,
            kv_cache_dtype=q.kv_cache_dtype,
            max_seq_len=length or None,
        )
    else:
        from kvplan.catalog.lookup import load_model
        from kvplan.engines import sglang

        static = q.mem_fraction_static
        result = sglang.kv_cache(
            spec,
            gpu,
            tp=tp,
            pp=pp,
            mem_fraction_static=None if static is None else float(static),
            kv_cache_dtype=q.kv_cache_dtype,
            page_size=q.page_size or 1,
            max_total_tokens=q.max_total_tokens,
            version=q.version,
            speculative_algorithm=q.speculative_algorithm,
            speculative_num_draft_tokens=q.speculative_num_draft_tokens,
            speculative_draft_model=(
                None if q.speculative_draft_model is None else load_model(q.speculative_draft_model)
            ),
            **sglang_lora(q),
        )
    return TokenPoolPlan(result, gpu, tp, pp, length, fraction)


# --- llama.cpp: one machine, -np sequences of -c / -np cells each ------------------------------


def _llamacpp(spec: ModelSpec, gpu: GPU, q: Question) -> tuple[Any, Verdict]:
    """llama.cpp's answer. Its ``-c`` is the cells of all ``-np`` sequences together, so a
    question of ``n`` requests of ``c`` tokens is ``-np n -c n*c``; llama.cpp plans one
    machine, so the fewest-GPU question is answered on the GPUs given (``-tp``, default 1)
    and says so. The most requests at a context is the largest ``-np`` with every layer on
    the GPU (or the ``-ngl`` given); ``-np N`` asks for N requests (the CLI makes it the
    concurrency), and when one sequence needs the host too, the answer is at ``-np 1``."""
    from kvplan.engines import llamacpp_plan

    ask = q.llamacpp or llamacpp_plan.LlamaCppAsk()
    n = q.concurrency or ask.n_seq_max
    if q.concurrency is not None and q.llamacpp is not None and ask.n_seq_max not in (1, n):
        raise UnitError(
            f"-np {ask.n_seq_max} and --concurrency {n}: llama.cpp's -np is the concurrency;"
            " give one of them"
        )
    cells = q.max_model_len * n if q.max_model_len is not None else None
    ask = replace(
        ask,
        n_ctx=cells,
        n_seq_max=n,
        num_gpus=q.tensor_parallel_size or ask.num_gpus,
    )
    kind: Kind = "max_context" if q.kind == "max_context" else "fits"
    most = None
    if q.kind == "max_concurrency" and q.max_model_len is not None:
        most = llamacpp_plan.most_sequences(spec, gpu, ask, q.max_model_len)
    if most is not None:
        plan, n, kind = most, most.ask.n_seq_max, "max_concurrency"
    else:
        plan = llamacpp_plan.plan(spec, gpu, ask)
    per_sequence = plan.n_ctx // n if n else 0
    notes: tuple[str, ...] = ()
    if q.kind == "fewest_gpus":
        notes = (f"llama.cpp plans one machine: answered on {ask.num_gpus} GPU(s), not searched",)
    # Without -ngl, "fits" is every layer on the GPU: llama.cpp runs more with layers on the
    # host (the plan's -ngl says how many), slower, and that is the user's call to make.
    ngl, layers = plan.n_gpu_layers, plan.n_layer + 1
    fits = plan.fits and (ask.n_gpu_layers is not None or ngl == layers)
    limit = ""
    if plan.fits and not fits:
        limit = (
            f"only {ngl} of {layers} layers fit on the GPU: llama.cpp runs the rest on the host"
            f" (give -ngl {ngl} to plan that)"
        )
    elif ngl < layers:
        notes += (f"{ngl} of {layers} layers on the GPU (-ngl): the rest run on the host",)
    verdict = Verdict(
        engine="llama.cpp",
        kind=kind,
        max_model_len=q.max_model_len or per_sequence,
        concurrency=None if kind == "max_concurrency" else n,
        max_concurrency=n if fits else 0,
        max_context_tokens=per_sequence if kind == "max_context" else None,
        fits=fits,
        tensor_parallel_size=ask.num_gpus,
        limit=limit,
        warnings=notes,
    )
    return plan, verdict
