"""GGUF metadata -> a kvplan spec mapping, per ``general.architecture``, as llama.cpp reads it.

Keys are ``{arch}.block_count``, ``{arch}.attention.head_count_kv`` and so on
(gguf-py ``Keys``, llama.cpp ``src/llama-arch.cpp``). Head counts and MLP widths may be one
value or one per layer; a layer with no K/V heads is recurrent (Mamba) or has no cache. The
sliding-window layout follows llama.cpp's ``load_hparams`` (``src/llama-model.cpp``), which
places window layers by a fixed pattern per architecture: with pattern ``n`` layer ``i`` slides
when ``i % n < n - 1`` (Gemma 3: ``n`` = 6, five sliding then one global). Where llama.cpp
runs a model differently from its Hugging Face config (Phi-3's window is disabled, Mistral's
is never read), the spec follows llama.cpp, since that is what runs a GGUF file, and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kvplan.errors import SpecError
from kvplan.importers.gguf_format import GGUFArray
from kvplan.importers.reading import compact_layer_types
from kvplan.model.limits import MAX_DIM, MAX_LAYERS, MAX_TOKENS


class Meta:
    """The metadata of one architecture: ``get("block_count")`` reads ``{arch}.block_count``."""

    def __init__(self, arch: str, metadata: Mapping[str, Any]) -> None:
        self.arch, self.metadata = arch, metadata

    def raw(self, key: str) -> Any:
        return self.metadata.get(f"{self.arch}.{key}")

    def whole(self, key: str, default: int | None = None, maximum: int = MAX_DIM) -> int | None:
        """``{arch}.key`` as an int in ``[0, maximum]`` (absent: ``default``)."""
        value = self.raw(key)
        if value is None:
            return default
        return _whole(value, f"{self.arch}.{key}", maximum)

    def per_layer(
        self, key: str, n: int, default: tuple[int, ...] | None
    ) -> tuple[int, ...] | None:
        """``{arch}.key`` for each of ``n`` layers: one value for all, or an array of ``n``."""
        name = f"{self.arch}.{key}"
        value = self.raw(key)
        if value is None:
            return default
        if isinstance(value, GGUFArray):
            raise SpecError("", [f"{name}: an array of {value.count:,} {value.item_type} items"])
        if isinstance(value, tuple):
            if len(value) != n:
                raise SpecError("", [f"{name}: has {len(value):,} entries but {n} layers"])
            return tuple(_whole(v, name, MAX_DIM) for v in value)
        return (_whole(value, name, MAX_DIM),) * n


def _whole(value: Any, name: str, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise SpecError("", [f"{name}: must be an integer from 0 to {maximum:,}, got {value!r}"])
    return value


@dataclass(frozen=True, slots=True)
class Arch:
    """How one GGUF architecture maps: its Hugging Face ``model_type``, where its layers
    slide (``layers``), what a layer without K/V heads is (``no_kv``), and any extra keys."""

    model_type: str
    layers: Callable[[Meta, list[str], dict[str, Any], list[str]], None] | None = None
    no_kv: Callable[[Meta, int, int], str] | None = None
    extra: Callable[[Meta, dict[str, Any], list[str]], None] | None = None


# --- sliding windows -------------------------------------------------------------------------


def _every(
    pattern: int, default_window: int | None = None, optional: bool = False, chunked: bool = False
) -> Callable[[Meta, list[str], dict[str, Any], list[str]], None]:
    """llama.cpp's ``set_swa_pattern(pattern)``: layer ``i`` slides when ``i % pattern <
    pattern - 1``. ``optional``: no window key (or 0) means every layer is global."""

    def layers(m: Meta, kinds: list[str], spec: dict[str, Any], notes: list[str]) -> None:
        window = m.whole("attention.sliding_window", default_window, MAX_TOKENS)
        if chunked:
            if window == 0:
                return
            window = 8192  # llama.cpp fixes Llama 4's chunk at 8192, whatever the file says
        elif not window:
            if optional:
                return
            raise SpecError("", [f"{m.arch}.attention.sliding_window: required, not in the file"])
        kind = "chunked_attention" if chunked else "sliding_attention"
        for i, k in enumerate(kinds):
            if k == "full_attention" and i % pattern < pattern - 1:
                kinds[i] = kind
        spec["attention_chunk_size" if chunked else "sliding_window"] = window
        short = kind.split("_")[0]
        notes.append(
            f"{pattern - 1} {short} : 1 global layers ({short} {window:,}),"
            f" llama.cpp's pattern for {m.arch}"
        )

    return layers


def _window_ignored(m: Meta, kinds: list[str], spec: dict[str, Any], notes: list[str]) -> None:
    window = m.whole("attention.sliding_window", None, MAX_TOKENS)
    if window:
        notes.append(f"sliding_window {window:,} not used: llama.cpp runs {m.arch} fully global")


# --- layers without K/V heads ----------------------------------------------------------------


def _mamba_if_no_kv(m: Meta, i: int, ff: int) -> str:
    return "mamba"


def _nemotron_h(m: Meta, i: int, ff: int) -> str:
    # llama.cpp: a layer is recurrent iff it has neither K/V heads nor an MLP width.
    return "no_cache" if ff else "mamba"


def _mamba_state(version: int) -> Callable[[Meta, dict[str, Any], list[str]], None]:
    """``ssm.*`` keys into the spec's Mamba sizes: Mamba2 heads are ``ssm.time_step_rank``
    (llama.cpp's ``ssm_dt_rank``), each ``inner_size / heads`` wide; Mamba1 expands
    ``inner_size / embedding_length``."""

    def extra(m: Meta, spec: dict[str, Any], notes: list[str]) -> None:
        d_inner = m.whole("ssm.inner_size")
        spec["mamba_d_state"] = m.whole("ssm.state_size")
        spec["mamba_d_conv"] = m.whole("ssm.conv_kernel")
        if d_inner is None or spec["mamba_d_state"] is None or spec["mamba_d_conv"] is None:
            raise SpecError("", [f"{m.arch}.ssm.inner_size, state_size, conv_kernel: required"])
        if version == 2:
            heads = m.whole("ssm.time_step_rank")
            if not heads or d_inner % heads:
                raise SpecError("", [f"{m.arch}.ssm.time_step_rank: must divide ssm.inner_size"])
            spec["mamba_n_heads"], spec["mamba_d_head"] = heads, d_inner // heads
            spec["mamba_n_groups"] = m.whole("ssm.group_count", 1) or 1
        else:
            hidden = spec.get("hidden_size")
            if not hidden or d_inner % hidden:
                raise SpecError("", [f"{m.arch}.ssm.inner_size: not a multiple of the width"])
            spec["mamba_expand"] = d_inner // hidden
        notes.append(f"Mamba{version} state from {m.arch}.ssm.*")

    return extra


# --- multi-head latent attention --------------------------------------------------------------


def _mla(m: Meta, spec: dict[str, Any], notes: list[str]) -> None:
    """DeepSeek V2/V3 (``deepseek2``): the latent rank and RoPE dims; head sizes from the
    ``*_mla`` keys of newer conversions (where ``key_length`` is the 576-wide latent)."""
    rank, rope = m.whole("attention.kv_lora_rank"), m.whole("rope.dimension_count")
    if not rank or not rope:
        raise SpecError("", [f"{m.arch}.attention.kv_lora_rank, rope.dimension_count: required"])
    key = m.whole("attention.key_length_mla") or m.whole("attention.key_length")
    value = m.whole("attention.value_length_mla") or m.whole("attention.value_length")
    spec.pop("head_dim", None)
    spec.pop("v_head_dim", None)
    spec["num_key_value_heads"] = spec["num_attention_heads"]  # as the HF config states it
    spec["kv_lora_rank"], spec["qk_rope_head_dim"] = rank, rope
    if key and key > rope:
        spec["qk_nope_head_dim"] = key - rope
    if value:
        spec["v_head_dim"] = value
    q_rank = m.whole("attention.q_lora_rank")
    if q_rank:
        spec["q_lora_rank"] = q_rank
    notes.append(f"MLA: one latent of kv_lora_rank {rank} + rope {rope} per layer")


def _nextn(m: Meta, spec: dict[str, Any], notes: list[str]) -> None:
    """GLM-4.5: the trailing next-token-prediction layers keep no cache in llama.cpp."""
    nextn = m.whole("nextn_predict_layers", 0) or 0
    if nextn:
        n = spec["num_hidden_layers"]
        spec["num_hidden_layers"] = n - nextn
        kinds = spec.get("layer_types")
        if kinds is not None:
            spec["layer_types"] = kinds[: n - nextn]
        notes.append(f"last {nextn} of {n} blocks are next-token prediction (MTP): no cache")


_MAMBA1, _MAMBA2 = _mamba_state(1), _mamba_state(2)

#: GGUF ``general.architecture`` -> how it maps. Everything else is refused.
ARCHITECTURES: dict[str, Arch] = {
    "llama": Arch("llama", _window_ignored),
    "llama4": Arch("llama4_text", _every(4, chunked=True)),
    "qwen2": Arch("qwen2", _window_ignored),
    "qwen2moe": Arch("qwen2_moe"),
    "qwen3": Arch("qwen3"),
    "qwen3moe": Arch("qwen3_moe"),
    "gemma": Arch("gemma"),
    "gemma2": Arch("gemma2", _every(2, default_window=4096)),
    "gemma3": Arch("gemma3_text", _every(6, optional=True)),
    "deepseek2": Arch("deepseek_v3", extra=_mla),
    "gpt-oss": Arch("gpt_oss", _every(2)),
    "gptoss": Arch("gpt_oss", _every(2)),  # Ollama's spelling
    "phi3": Arch("phi3", _window_ignored),
    "command-r": Arch("cohere"),
    "cohere2": Arch("cohere2", _every(4)),
    "granite": Arch("granite"),
    "granitemoe": Arch("granitemoe"),
    "granitehybrid": Arch("granitemoehybrid", no_kv=_mamba_if_no_kv, extra=_MAMBA2),
    "olmo2": Arch("olmo2", _every(4, optional=True)),
    "glm4": Arch("glm4"),
    "glm4moe": Arch("glm4_moe", extra=_nextn),
    "nemotron_h": Arch("nemotron_h", no_kv=_nemotron_h, extra=_MAMBA2),
    "jamba": Arch("jamba", no_kv=_mamba_if_no_kv, extra=_MAMBA1),
}


def supported_architectures() -> list[str]:
    """Every GGUF ``general.architecture`` kvplan maps, sorted."""
    return sorted(ARCHITECTURES)


def map_architecture(
    arch_name: str, metadata: Mapping[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """The spec keys of the cache geometry (layers, heads, windows, MLA, Mamba state) and the
    notes on how each was derived. Raises SpecError (no path) for an unmapped architecture or
    a value out of range."""
    arch = ARCHITECTURES.get(arch_name)
    if arch is None:
        raise SpecError(
            "",
            [
                f"general.architecture: {arch_name[:40]!r} is not a GGUF architecture kvplan"
                f" maps; supported: {', '.join(supported_architectures())}"
            ],
        )
    m = Meta(arch_name, metadata)
    notes: list[str] = []
    n = m.whole("block_count", maximum=MAX_LAYERS)
    hidden = m.whole("embedding_length")
    if not n or not hidden:
        raise SpecError("", [f"{arch_name}.block_count, embedding_length: required, not 0"])
    heads = m.per_layer("attention.head_count", n, None)
    if heads is None:
        raise SpecError("", [f"{arch_name}.attention.head_count: required"])
    kv = m.per_layer("attention.head_count_kv", n, heads) or heads
    ff = m.per_layer("feed_forward_length", n, (0,) * n) or (0,) * n
    spec: dict[str, Any] = {"model_type": arch.model_type, "num_hidden_layers": n}
    spec["hidden_size"] = hidden
    kinds = _kinds(arch, m, kv, ff)
    attention = [i for i, k in enumerate(kinds) if k == "full_attention"]
    if not attention:
        raise SpecError("", [f"{arch_name}: no layer has attention heads"])
    spec["num_attention_heads"] = _one(heads, attention, "attention.head_count", arch_name)
    spec["num_key_value_heads"] = _one(kv, attention, "attention.head_count_kv", arch_name)
    _head_dims(m, spec)
    if arch.layers is not None:
        arch.layers(m, kinds, spec, notes)
    if any(k != "full_attention" for k in kinds) and arch.layers is None:
        spec["layer_types"] = kinds
    elif any(k != "full_attention" for k in kinds):
        spec["layer_types"] = kinds
        compact_layer_types(spec)
    if max(ff):
        spec["intermediate_size"] = max(ff)
    context = m.whole("context_length", None, MAX_TOKENS)
    if context:
        spec["max_position_embeddings"] = context
    if arch.extra is not None:
        arch.extra(m, spec, notes)
    return spec, notes


def _kinds(arch: Arch, m: Meta, kv: tuple[int, ...], ff: tuple[int, ...]) -> list[str]:
    kinds = []
    for i, heads in enumerate(kv):
        if heads:
            kinds.append("full_attention")
        elif arch.no_kv is None:
            raise SpecError("", [f"{m.arch}.attention.head_count_kv: 0 at layer {i}"])
        else:
            kinds.append(arch.no_kv(m, i, ff[i]))
    return kinds


def _one(values: tuple[int, ...], layers: list[int], key: str, arch: str) -> int:
    """The one value ``key`` takes on the attention layers; a spec holds one head count."""
    found = sorted({values[i] for i in layers})
    if len(found) != 1 or not found[0]:
        raise SpecError(
            "",
            [f"{arch}.{key}: differs across attention layers ({found}); kvplan specs hold one"],
        )
    return found[0]


def _head_dims(m: Meta, spec: dict[str, Any]) -> None:
    """``key_length``/``value_length``, stated where they are not ``hidden / heads``."""
    key = m.whole("attention.key_length")
    value = m.whole("attention.value_length")
    if key:
        spec["head_dim"] = key
    if value and value != (key or spec["hidden_size"] // spec["num_attention_heads"]):
        spec["v_head_dim"] = value
