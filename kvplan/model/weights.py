"""Weight bytes: from a spec's parameter counts and formats, per rank and per pipeline stage.

A checkpoint stores some parameters in ``weight_dtype`` (a quantized format, scales counted)
and the rest (embeddings, norms, routers...) in the model dtype. ``--quantization`` re-formats
every parameter but the embeddings and the output head, as serving engines quantize linear
layers only.

Worked example (Llama 3.1 8B, bf16): 8,030,261,248 parameters x 2 B = 16,060,522,496 B
(14.96 GiB; vLLM logs 14.99 GiB, the difference being rotary caches and buffers).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.arguments import as_instance, as_int, as_optional_str, as_parallel
from kvplan.errors import SpecError, UnitError
from kvplan.model.limits import MAX_LAYERS
from kvplan.model.spec import ModelSpec
from kvplan.units import DType, cdiv, resolve_dtype

# Storage of each --quantization format, scales and zero points included:
#   fp8    per-tensor scale: 1 B a weight (the scale per matrix is noise)
#   int8   W8A8 with an fp32 scale per output channel: counted as 4 B per 4096 weights
#   int4   4-bit values with an fp16 scale per group of 128: 64 + 2 = 66 B per 128
#   awq    int4, group 128, fp16 scale and a 4-bit zero point: 64 + 2 + 0.5 = 133 B per 256
#   gptq   as awq (packed int32 zeros); the per-row g_idx is not counted
#   mxfp4  32 e2m1 values + one e8m0 scale = 17 B per 32
#   nvfp4  16 e2m1 values + one e4m3 scale = 9 B per 16
QUANTIZATIONS: dict[str, DType] = {
    "fp8": DType("fp8", 1, 1),
    "int8": DType("int8", 4096, 4100),
    "int4": DType("int4", 128, 66),
    "awq": DType("awq", 256, 133),
    "gptq": DType("gptq", 256, 133),
    "mxfp4": DType("mxfp4", 32, 17),
    "nvfp4": DType("nvfp4", 16, 9),
}

# A checkpoint's fp8 ``weight_dtype`` (DeepSeek V3, Kimi K2, Qwen3 FP8) uses 128 x 128 blocks
# with one fp32 scale each: 16,384 + 4 B per 16,384 weights.
_CHECKPOINT_FP8 = DType("fp8_block128", 128 * 128, 128 * 128 + 4)


@dataclass(frozen=True, slots=True)
class Weights:
    """Bytes of a model's weights, split where pipeline stages need it."""

    embedding_bytes: int
    lm_head_bytes: int
    layers_bytes: int
    quantization: str | None
    model_dtype: str
    description: str

    @property
    def total_bytes(self) -> int:
        return self.embedding_bytes + self.lm_head_bytes + self.layers_bytes


def quantization_names() -> str:
    return ", ".join(QUANTIZATIONS)


def model_weights(
    spec: ModelSpec, dtype: str | None = None, quantization: str | None = None
) -> Weights:
    """The weights of ``spec`` in its own formats, or re-formatted by ``dtype``/``quantization``.

    ``dtype`` replaces the model dtype (unquantized parameters); ``quantization`` re-formats
    all parameters but the embeddings and the output head. A spec with ``stored_weight_bytes``
    (a GGUF file) is sized from those bytes unless they re-format its weights. Raises
    UnitError for an unknown dtype or quantization, ArgumentTypeError (a TypeError) for an
    argument of the wrong type.
    """
    as_instance(spec, ModelSpec, "spec", "a ModelSpec")
    as_optional_str(dtype, "dtype")
    as_optional_str(quantization, "quantization")
    stored = spec.stored_weight_bytes
    same_dtype = dtype is None or resolve_dtype(dtype).name == resolve_dtype(spec.torch_dtype).name
    if stored is not None and same_dtype and quantization is None:
        return Weights(
            embedding_bytes=stored.embedding_bytes,
            lm_head_bytes=stored.output_bytes,
            layers_bytes=sum(stored.layers_bytes),
            quantization=None,
            model_dtype=resolve_dtype(spec.torch_dtype).name,
            description=f"{stored.format} as the file stores it",
        )
    if spec.num_parameters is None:
        raise SpecError(
            spec.name,
            [
                "num_parameters: required to size the weights; add it to the spec, or import"
                " the model folder with its safetensors files or index"
            ],
        )
    model_dtype = resolve_dtype(dtype or spec.torch_dtype)
    embed_params = (spec.vocab_size or 0) * (spec.hidden_size or 0)
    head_params = 0 if spec.tie_word_embeddings else embed_params
    layer_params = spec.num_parameters - embed_params - head_params
    if layer_params < 0:
        raise SpecError(spec.name, ["num_parameters: smaller than its embeddings"])
    if quantization is not None:
        fmt = QUANTIZATIONS.get(quantization.lower())
        if fmt is None:
            raise UnitError(
                f"unknown quantization {quantization!r}; allowed: {quantization_names()}"
            )
        quantized = layer_params
        description = f"{fmt.name} linear layers, {model_dtype.name} embeddings"
    elif spec.weight_dtype is not None and spec.weight_dtype != spec.torch_dtype:
        fmt = _checkpoint_format(spec.weight_dtype)
        quantized = min(spec.num_quantized_parameters or layer_params, layer_params)
        description = f"{fmt.name} for {quantized:,} parameters, {model_dtype.name} for the rest"
    else:
        fmt, quantized = model_dtype, 0
        description = model_dtype.name
    plain = layer_params - quantized
    return Weights(
        embedding_bytes=model_dtype.row_bytes(embed_params),
        lm_head_bytes=model_dtype.row_bytes(head_params),
        layers_bytes=fmt.row_bytes(quantized) + model_dtype.row_bytes(plain),
        quantization=quantization.lower() if quantization else None,
        model_dtype=model_dtype.name,
        description=description,
    )


def unsized_weights(spec: ModelSpec, dtype: str | None = None) -> Weights:
    """Weights of 0 B for a spec without ``num_parameters``, where a given KV pool
    (``--kv-cache-memory``) makes their size irrelevant to the plan; the description says so."""
    return Weights(
        embedding_bytes=0,
        lm_head_bytes=0,
        layers_bytes=0,
        quantization=None,
        model_dtype=resolve_dtype(dtype or spec.torch_dtype).name,
        description="not sized (no num_parameters; --kv-cache-memory sets the pool)",
    )


def weights_for_pool(
    spec: ModelSpec, dtype: str | None, quantization: str | None, *, pool_given: bool
) -> Weights:
    """``model_weights``, except that a spec without ``num_parameters`` whose KV pool is given
    (``--kv-cache-memory``) gets unsized weights instead of an error: the pool does not
    depend on them."""
    if spec.num_parameters is None and spec.stored_weight_bytes is None and pool_given:
        return unsized_weights(spec, dtype)
    return model_weights(spec, dtype, quantization)


def whole_bits(weight_dtype: str) -> int:
    """The whole bits a weight of ``weight_dtype`` takes, scales included and rounded down:
    8 for fp8, int8 and q8_0 (8.5), 4 for int4, awq, gptq, mxfp4, nvfp4 and q4_0 (4.5)."""
    fmt = _checkpoint_format(weight_dtype)
    return 8 * fmt.block_bytes // fmt.block_values


def _checkpoint_format(weight_dtype: str) -> DType:
    if weight_dtype in ("fp8_e4m3", "fp8_e5m2"):
        return _CHECKPOINT_FP8
    return QUANTIZATIONS.get(weight_dtype) or resolve_dtype(weight_dtype)


def pipeline_partition(num_layers: int, pipeline_parallel_size: int) -> tuple[int, ...]:
    """Layers per pipeline stage, split as vLLM splits them (vllm/distributed/utils.py).

    Equal shares; the remainder goes one layer each to the stages before the last, from the
    second-to-last backwards, since the first and last stages also hold the embeddings and
    the output head. 22 layers on 4 stages: (5, 6, 6, 5); 61 on 4: (15, 15, 16, 15).
    """
    as_int(num_layers, "num_layers", minimum=1, maximum=MAX_LAYERS)
    as_parallel(pipeline_parallel_size, "pipeline_parallel_size")
    if pipeline_parallel_size > num_layers:
        raise UnitError(
            f"pipeline_parallel_size {pipeline_parallel_size} exceeds the {num_layers} layers"
        )
    share, remainder = divmod(num_layers, pipeline_parallel_size)
    parts = [share] * pipeline_parallel_size
    for i in range(2, remainder + 2):
        parts[-i] += 1
    return tuple(parts)


def stage_weight_bytes(
    weights: Weights, num_layers: int, stage_layers: int, first: bool, last: bool, tp: int
) -> int:
    """Weight bytes on one rank of a stage holding ``stage_layers`` of ``num_layers`` layers.

    Layers are taken as equal in size; the first stage adds the embeddings, the last the
    output head (with tied embeddings and several stages the last keeps its own copy).
    Tensor parallelism splits everything evenly, embeddings and head included (both are
    vocabulary-parallel in the engines).
    """
    stage = weights.layers_bytes * stage_layers // num_layers
    if first:
        stage += weights.embedding_bytes
    if last:
        stage += weights.lm_head_bytes or (0 if first else weights.embedding_bytes)
    return cdiv(stage, tp)
