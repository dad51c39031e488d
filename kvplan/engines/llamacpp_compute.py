"""llama.cpp's compute buffers: exact on the CPU backend, estimates on a GPU (CUDA, Metal).

On the CPU backend (``cpu_graph_bytes``, read in llama.cpp 0c1e570: ``src/llama-graph.cpp``,
``src/models/*.cpp``, ``ggml/src/ggml-alloc.c``) the buffer is computed, not fitted: the prompt
graph ``graph_reserve`` builds is rebuilt node by node (the ops, their shapes and sources, in
the order ``ggml_build_forward_expand`` visits them; weights and the cache live elsewhere and
are left out) and ggml's allocator is replayed over it. Inputs are allocated first; a node
takes over a source's memory when its op can work in place (``ggml_op_can_inplace``), the
layouts match and it is that source's last reader; a tensor is freed after its last reader,
a view's base once no view of it is read any more; outputs are never freed; blocks are 32 B
aligned and taken best fit among the freed ones, else from the end, which grows the buffer.
The buffer is the end of the highest block ever taken. Checked byte for byte against the
recording ``tests/data/llamacpp_oracle_0c1e570.json`` (the buffer's size read from llama.cpp).
The same replay does not carry over to a GPU as it is: there the graph is split between
backends, with copies of the inputs at each split, which is not modelled here.

On a GPU the buffer is estimated, not replayed. The buffer is the peak of ggml's graph
allocator; a tensor is freed once its last reader ran, so the peak is one layer's live
activations or the logits, never a sum over layers (it does not grow with ``-ngl``). With
``T = min(n_ubatch, n_batch)`` tokens, ``cells`` KV cells, ``q = heads x head_dim`` (the
query and attention output width: 8,192 against ``n_embd`` 5,120 in Qwen3 32B), all f32:

- the output layer's GPU: logits and normed state, ``T x (n_vocab + n_embd) x 4``;
- attention without flash attention: scores plus mask, query, output and two ``n_embd``
  states, ``T x cells x (heads + 1) x 4 + T x (2 q + 2 n_embd) x 4``; with it the f16 mask,
  ``T x cells x 2 + T x (2 q + n_embd) x 4``;
- the MLP: ``T x (3 x n_ff + 2 x n_embd) x 4``.

The GPU's buffer is the largest of its terms; the host's (``CUDA_Host``) holds the input
embeddings and the mask, ``T x n_embd x 4 + T x cells x (4, or 2 with flash attention)``.
Why not the CPU replay: the scheduler keeps the inputs on the host and copies what the GPU's
nodes read, so the replay less the host's inputs falls 12-16 MiB short of the full-offload
logs below (Qwen3 32B: 1,080 MiB against 1,092; the R1 distill: 291 against 307).

Against public CUDA logs (``tests/data/llamacpp_gpu_compute_logs.yaml``, printed MiB minus
kvplan's; checked by ``tests/test_llamacpp_gpu_logs.py``):

========================= ======================= ================== ==============
graph (logs)              case                    GPU error          host error
========================= ======================= ================== ==============
llama: Mistral 7B (2)     full offload, fa off    0.00 MiB           +0.01 MiB
llama: TriLM 3.9B (1)     full offload, fa off    0.00 MiB           not printed
llama: Llama 3 8B (1)     16 of 32 layers, fa off +89 MiB (5.2 %)    +0.01 MiB
phi3: Phi-3 medium (1)    15 of 41 layers, fa off +106.06 MiB (46 %) not printed
qwen3: Qwen3 32B (1)      full offload, fa off    0.00 MiB           +0.01 MiB
qwen2: R1 Distill 32B (1) full offload, fa on     0.00 MiB           +16.01 MiB (a)
gemma: Gemma 2B (1)       full offload            +0.25 MiB          not printed
========================= ======================= ================== ==============

(a) a build of February 2025 that kept the mask in f32 under flash attention; 0c1e570's
f16 mask is what the rule follows. With partial offload the GPU also runs the host layers'
large-batch ops and holds what they read from the host: not modelled, the rule is a lower
bound there. No public log pins the flash-attention term, Metal, MoE routing (qwen3moe,
gpt-oss, deepseek2, mixtral), sliding-window graphs (gemma2/3) or recurrent layers: there
the rule is the order of magnitude, and llama.cpp's ``--fit`` headroom (1 GiB) applies.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kvplan.engines.ggml_alloc import Graph, graph_peak_bytes

if TYPE_CHECKING:
    from collections.abc import Sequence

    from kvplan.model.spec import ModelSpec

__all__ = [
    "DECODER_GRAPHS",
    "MoE",
    "cpu_graph_bytes",
    "gpu_compute_bytes",
    "host_compute_bytes",
]


def _dims(spec: ModelSpec) -> tuple[int, int, int, int]:
    embd = spec.hidden_size or 0
    return (
        embd,
        spec.vocab_size or 0,
        spec.num_attention_heads or 1,
        spec.intermediate_size or 4 * embd,
    )


def gpu_compute_bytes(
    spec: ModelSpec,
    *,
    cells: int,
    n_ubatch: int,
    flash_attn: bool,
    holds_output: bool,
    holds_layers: bool = True,
) -> int:
    """Estimated bytes of one GPU's compute buffer (see the module docstring): the largest
    of the logits (``holds_output``), the attention and the MLP (``holds_layers``)."""
    embd, vocab, heads, ffn = _dims(spec)
    # the query and the attention output are heads x head_dim wide, not n_embd: Qwen3 32B
    # (64 x 128 = 8,192 against 5,120) printed 1,092 MiB = 1,040 + 2 x 16 + 2 x 10
    q = heads * (spec.head_dim or embd // heads)
    t = n_ubatch
    terms = [t * embd * 4]
    if holds_output:
        terms.append(t * (vocab + embd) * 4)
    if holds_layers:
        if flash_attn:
            terms.append(t * cells * 2 + t * (2 * q + embd) * 4)
        else:
            terms.append(t * cells * (heads + 1) * 4 + t * (2 * q + 2 * embd) * 4)
        terms.append(t * (3 * ffn + 2 * embd) * 4)
    return max(terms)


def host_compute_bytes(spec: ModelSpec, *, cells: int, n_ubatch: int, flash_attn: bool) -> int:
    """Estimated bytes of the host's compute buffer next to a GPU (``CUDA_Host``)."""
    embd = spec.hidden_size or 0
    return n_ubatch * embd * 4 + n_ubatch * cells * (2 if flash_attn else 4)


# --- the CPU compute buffer: llama.cpp's prompt graph on ggml's allocator (ggml_alloc) ------


@dataclass(frozen=True, slots=True)
class MoE:
    """The routed experts of an MoE feed-forward, as a GGUF file declares them
    (``<arch>.expert_count``, ``expert_used_count``, ``expert_feed_forward_length``) and
    deepseek2's router: shared experts, leading dense layers, sigmoid gating with a selection
    bias (``exp_probs_b``), expert groups, normalised and scaled weights. The defaults are
    qwen3moe's (softmax, normalised, unscaled, no shared expert)."""

    num_experts: int
    num_experts_used: int
    expert_width: int
    num_shared: int = 0
    num_dense_lead: int = 0
    sigmoid: bool = False
    selection_bias: bool = False
    norm_weights: bool = True
    weights_scale: float = 0.0
    groups: tuple[int, int] = (0, 0)  # (expert_group_count, expert_group_used_count)


@dataclass(frozen=True, slots=True)
class _Shapes:
    tokens: int
    embd: int
    heads: int
    kv_heads: int
    head_dim: int
    v_head_dim: int
    qk_norm: bool
    ffn: int
    moe: MoE | None
    flash_attn: bool
    gemma: bool = False  # scaled embeddings and query, post norms, GeGLU (gemma2, gemma3)
    mla: tuple[int, int, int] | None = None  # MLA: (kv_lora_rank, qk_nope, qk_rope) dims
    cache_bytes: int = 2  # bytes of a K cache element (the transposed latent is copied)
    streams: int = 1
    q_lora: int = 0  # MLA's query rank: 0 for one projection (V2-Lite)
    # the Hadamard rotations of a quantized cache (K, V): the matrix's side, 0 for none
    rot: tuple[int, int] = (0, 0)
    cast: tuple[bool, bool] = (False, False)  # an f32 K, V cast to f16 for flash attention


@dataclass(frozen=True, slots=True)
class _Part:
    """The inputs of one cache part (full or sliding window): its write indices, its mask and
    the cells a token attends to in each stream."""

    k_idxs: int
    v_idxs: int
    mask: int
    cells: int
    rot: tuple[int, int] = (-1, -1)  # the rotation matrices' inputs (K, V), -1 for none


def _rotated(g: Graph, cur: int, side: int, rot: int, elements: int) -> int:
    """``llama_mul_mat_hadamard`` on a contiguous ``cur``: reshaped to rows of ``side``,
    multiplied by the rotation matrix, reshaped back."""
    if rot < 0:
        return cur
    return g.view(g.op("mul_mat", (side, elements // side), rot, g.view(cur)))


def _cache_view(g: Graph, s: _Shapes, cells: int, width: int, which: int) -> int:
    """A cache view as the attention reads it; under flash attention an f32 cache is cast
    to f16 first (``build_attn_mha``)."""
    view = g.view(g.view(into=-1))
    if s.flash_attn and s.cast[which]:
        return g.op("cpy", (width, cells, s.streams), view, width=2)
    return view


def _attention(g: Graph, x: int, s: _Shapes, pos: int, part: _Part) -> int:
    """``build_norm``, ``build_qkv`` with RoPE and ``build_attn``: the nodes in the order
    ``ggml_build_forward_expand`` visits them (Q, V, K; Q, K, V for gemma; the cache writes,
    the attention); returns the attention's output projection."""
    t, hd = s.tokens, s.head_dim
    norm = g.op("mul", (s.embd, t), g.op("rms_norm", (s.embd, t), x))

    def project(heads: int, rope: bool, rot: int) -> int:
        cur = g.view(g.op("mul_mat", (heads * hd, t), norm))
        if rope and s.qk_norm:
            cur = g.op("mul", (hd, heads, t), g.op("rms_norm", (hd, heads, t), cur))
        if rope:
            cur = g.op("rope", (hd, heads, t), cur, pos)
        return cur if rot < 0 else _rotated(g, cur, s.rot[rot], part.rot[rot], hd * heads * t)

    if s.gemma:  # the query is scaled before build_attn rotates it
        q = g.op("scale", (hd, s.heads, t), project(s.heads, True, -1))
        q = _rotated(g, q, s.rot[0], part.rot[0], hd * s.heads * t)
        k = project(s.kv_heads, True, 0)
        v = project(s.kv_heads, False, 1)
    else:
        q = project(s.heads, True, 0)
        v = project(s.kv_heads, False, 1)
        k = project(s.kv_heads, True, 0)
    g.view(g.view(k), part.k_idxs, into=-1)
    if not s.flash_attn:  # V is stored transposed, one index per element
        g.view(g.view(g.view(v)), part.v_idxs, g.view(into=-1), into=-1)
        cache_v = g.view(g.view(into=-1))
        cache_k = g.view(g.view(into=-1))
        q = g.view(g.view(q))
        kq = g.op("mul_mat", (part.cells, t, s.heads), cache_k, q)
        kq = g.op("soft_max", (part.cells, t, s.heads), kq, part.mask)
        kqv = g.view(g.op("mul_mat", (s.v_head_dim, t, s.heads), cache_v, kq))
        out = g.op("cont", (s.v_head_dim * s.heads, t), kqv)
    else:
        g.view(g.view(v), part.v_idxs, into=-1)
        q = g.view(g.view(q))
        cache_k = _cache_view(g, s, part.cells, hd * s.kv_heads, 0)
        cache_v = _cache_view(g, s, part.cells, s.v_head_dim * s.kv_heads, 1)
        fa = (s.v_head_dim, s.heads, t)
        out = g.view(g.op("flash_attn_ext", fa, q, cache_k, cache_v, part.mask))
        out = _rotated(g, out, s.rot[1], part.rot[1], s.v_head_dim * s.heads * t)
    return g.op("mul_mat", (s.embd, t), out)


def _mla_attention(g: Graph, x: int, s: _Shapes, pos: int, part: _Part) -> int:
    """deepseek2's absorbed MLA: the query (through its normed rank when ``q_lora_rank`` is
    set, as in V2 and V3; one projection in V2-Lite), its no-RoPE part multiplied by
    ``k_b`` into the latent, concatenated with its RoPE part; the normed latent with the
    key's RoPE part written to the cache; attention over the latent, then ``v_b``."""
    lora, nope, rope = s.mla or (0, 0, 0)
    t, h = s.tokens, s.heads
    norm = g.op("mul", (s.embd, t), g.op("rms_norm", (s.embd, t), x))
    q = norm
    if s.q_lora:  # wq_a, its norm, then wq_b
        q = _norm(g, g.op("mul_mat", (s.q_lora, t), norm), (s.q_lora, t))
    q = g.view(g.op("mul_mat", (h * (nope + rope), t), q))
    absorbed = g.view(g.op("mul_mat", (lora, t, h), g.view(g.view(q))))
    q = g.op("concat", (lora + rope, h, t), absorbed, g.op("rope", (rope, h, t), g.view(q), pos))
    kv = g.op("mul_mat", (lora + rope, t), norm)
    latent = g.view(g.op("mul", (lora, t), g.op("rms_norm", (lora, t), g.view(kv))))
    k = g.op("concat", (lora + rope, 1, t), latent, g.op("rope", (rope, 1, t), g.view(kv), pos))
    g.view(g.view(k), part.k_idxs, into=-1)
    if not s.flash_attn:
        cache = g.view(into=-1)
        v = g.op("cont", (part.cells, lora), g.view(g.view(g.view(cache))), width=s.cache_bytes)
        cache_k = g.view(cache)
        q = g.view(g.view(q))
        kq = g.op("mul_mat", (part.cells, t, h), cache_k, q)
        kq = g.op("soft_max", (part.cells, t, h), kq, part.mask)
        kqv = g.op("mul_mat", (s.v_head_dim, t, h), g.op("mul_mat", (lora, t, h), v, kq))
        out = g.op("cont", (s.v_head_dim * h, t), g.view(kqv))
    else:
        q = g.view(g.view(q))
        cache = g.view(into=-1)
        cache_k, cache_v = g.view(cache), g.view(g.view(cache))
        if s.cast[0]:  # an f32 latent cast to f16 for flash attention, as K and as V
            cache_k = g.op("cpy", (lora + rope, part.cells, s.streams), cache_k, width=2)
            cache_v = g.op("cpy", (lora, part.cells, s.streams), cache_v, width=2)
        fa = g.view(g.op("flash_attn_ext", (lora, h, t), q, cache_k, cache_v, part.mask))
        mla = g.view(g.op("mul_mat", (s.v_head_dim, t, h), fa))
        out = g.view(g.op("cont", (s.v_head_dim, h, t), mla))
    return g.op("mul_mat", (s.embd, t), out)


def _selection(g: Graph, probs: int, moe: MoE, t: int) -> int:
    """deepseek2's expert groups: the best two scores of each group summed, the best groups
    kept and the others' experts masked to -inf (``ggml_fill``, ``set_rows``); returns the
    masked scores the experts are chosen from."""
    n, (num_groups, used_groups) = moe.num_experts, moe.groups
    per_group = n // num_groups
    grouped = g.view(probs)
    rows = g.view(grouped)
    top2 = g.view(g.op("argsort", (per_group, num_groups, t), grouped))
    best = g.view(g.op("get_rows", (1, 2, num_groups, t), rows, top2))
    scores = g.view(g.op("sum_rows", (1, num_groups, t), best))
    kept = g.view(g.op("argsort", (num_groups, t), scores))
    chosen = g.op("get_rows", (per_group, used_groups, t), grouped, kept)
    filled = g.op("fill", (per_group, num_groups, t), grouped)
    return g.view(g.view(chosen, kept, filled, into=filled))


def _router(g: Graph, x: int, s: _Shapes, moe: MoE) -> tuple[int, int]:
    """The router of ``build_moe_ffn``: logits, probabilities (softmax or sigmoid), the
    selection (biased, grouped), the top-k experts and their weights (normalised, scaled);
    returns (top-k, weights)."""
    t, n, used = s.tokens, moe.num_experts, moe.num_experts_used
    logits = g.op("mul_mat", (n, t), x)
    probs = g.op("sigmoid" if moe.sigmoid else "soft_max", (n, t), logits)
    reshaped = g.view(probs)
    selection = g.op("add", (n, t), probs) if moe.selection_bias else probs
    if moe.groups[0] > 1:
        selection = _selection(g, selection, moe, t)
    topk = g.view(g.op("argsort", (n, t), selection))
    weights = g.op("get_rows", (1, used, t), reshaped, topk)
    if moe.norm_weights:
        weights = g.view(weights)
        total = g.op("clamp", (1, t), g.op("sum_rows", (1, t), weights))
        weights = g.view(g.op("div", (used, t), weights, total))
    if moe.weights_scale not in (0.0, 1.0):
        weights = g.op("scale", (1, used, t), weights)
    return topk, weights


def _moe_ffn(g: Graph, x: int, s: _Shapes, moe: MoE) -> int:
    """``build_moe_ffn``: the router, the selected experts' gate, up, SwiGLU and down
    (``MUL_MAT_ID``, ``used x width`` per token), weighted and summed over the used experts;
    then deepseek2's shared experts, added."""
    t, used = s.tokens, moe.num_experts_used
    topk, weights = _router(g, x, s, moe)
    cur = g.view(x)
    gate = g.op("mul_mat_id", (moe.expert_width, used, t), cur, topk)
    up = g.op("mul_mat_id", (moe.expert_width, used, t), cur, topk)
    act = g.op("swiglu", (moe.expert_width, used, t), gate, up)
    down = g.op("mul_mat_id", (s.embd, used, t), act, topk)
    experts = g.op("mul", (s.embd, used, t), down, weights)
    parts = [g.view(experts) for _ in range(used)]
    out = g.op("cont", (s.embd, t), parts[0]) if used == 1 else parts[0]
    for part in parts[1:]:
        out = g.op("add", (s.embd, t), out, part)
    if moe.num_shared:
        shared = _dense_ffn(g, x, replace(s, ffn=moe.num_shared * moe.expert_width))
        out = g.op("add", (s.embd, t), out, shared)
    return out


def _dense_ffn(g: Graph, x: int, s: _Shapes) -> int:
    """``build_ffn`` with a gate: gate, up, their SwiGLU (GeGLU for gemma) and down."""
    gate = g.op("mul_mat", (s.ffn, s.tokens), x)
    up = g.op("mul_mat", (s.ffn, s.tokens), x)
    return g.op("mul_mat", (s.embd, s.tokens), g.op("glu", (s.ffn, s.tokens), gate, up))


def _norm(g: Graph, x: int, shape: tuple[int, ...], *, output: bool = False) -> int:
    return g.op("mul", shape, g.op("rms_norm", shape, x), output=output)


def _block(g: Graph, x: int, s: _Shapes, inputs: tuple[int, _Part, int | None, bool]) -> int:
    """One layer: attention, (the last layer's rows kept for the outputs), feed-forward
    (routed when the last input says so)."""
    pos, part, out_ids, routed = inputs
    e, n = s.embd, s.tokens
    attn = (_mla_attention if s.mla else _attention)(g, x, s, pos, part)
    if out_ids is not None:
        n = g.tensors[out_ids].num_bytes // 4
        attn = g.op("get_rows", (e, n), attn, out_ids)
        s = replace(s, tokens=n)
    if s.gemma:
        attn = _norm(g, attn, (e, n))
    if out_ids is not None:
        x = g.op("get_rows", (e, n), x, out_ids)
    ffn_inp = g.op("add", (e, n), attn, x)
    cur = _norm(g, ffn_inp, (e, n))
    cur = _moe_ffn(g, cur, s, s.moe) if s.moe and routed else _dense_ffn(g, cur, s)
    if s.gemma:
        cur = _norm(g, cur, (e, n))
    return g.op("add", (e, n), cur, ffn_inp)


def _decoder_graph(
    s: _Shapes, *, kinds: Sequence[str], cells: dict[str, int], vocab: int, outputs: int
) -> Graph:
    """llama.cpp's graph of a decoder for a prompt ubatch of ``s.tokens`` tokens and
    ``outputs`` outputs (``graph_reserve``): ``kinds[i]`` names layer ``i``'s cache part,
    ``cells`` each part's cells per stream. Inputs are allocated first, in the order the graph
    meets them (a part's inputs where its first layer reads them)."""
    g = Graph()
    t, e = s.tokens, s.embd
    tokens = g.leaf(4 * t)
    g.leaf(4 * e * t)  # inp_embd: the input for embeddings in place of tokens, never read here
    pos = g.leaf(4 * t)
    parts: dict[str, _Part] = {}
    for kind in dict.fromkeys(kinds):
        # each part's rotation matrices are read first by its first layer's Q and V
        rot = tuple(g.leaf(4 * side * side) if side else -1 for side in s.rot)
        k_idxs = g.leaf(8 * t)
        v_idxs = -1 if s.mla else g.leaf(8 * t * (1 if s.flash_attn else s.kv_heads * s.v_head_dim))
        mask = g.leaf(cells[kind] * t * (2 if s.flash_attn else 4))
        parts[kind] = _Part(k_idxs, v_idxs, mask, cells[kind], (rot[0], rot[1]))
    out_ids = g.leaf(4 * outputs)
    x = g.op("get_rows", (e, t), tokens)
    if s.gemma:
        x = g.op("scale", (e, t), x)
    for il, kind in enumerate(kinds):
        last = out_ids if il == len(kinds) - 1 else None
        routed = s.moe is not None and il >= s.moe.num_dense_lead
        x = _block(g, x, s, (pos, parts[kind], last, routed))
    norm = _norm(g, x, (e, outputs), output=True)
    g.op("mul_mat", (vocab, outputs), norm, output=True)
    return g


#: the GGUF model types whose graph ``_decoder_graph`` builds: (q/k norms, gemma's layout);
#: qwen2's Q, K and V biases are added in place and change nothing
DECODER_GRAPHS = {
    "llama": (False, False),
    "qwen2": (False, False),
    "qwen3": (True, False),
    "qwen3_moe": (True, False),
    "gemma2": (False, True),
    "gemma3_text": (True, True),
    "deepseek_v2": (False, False),
    "deepseek_v3": (False, False),
}
#: the model types whose layers may route to experts: ``moe`` must be given
_MOE_TYPES = frozenset({"qwen3_moe", "deepseek_v2", "deepseek_v3"})


#: the cache types llama.cpp stores unquantized
_PLAIN_TYPES = ("f32", "f16", "bf16")


def _rotations(cache_types: tuple[str, str], head_dim: int, v_head_dim: int) -> tuple[int, int]:
    """The Hadamard rotations ``llama_kv_cache`` applies to a quantized K or V cache whose
    head size is a multiple of 64 (``attn_rot_k``, ``attn_rot_v``; ``LLAMA_ATTN_ROT_DISABLE``
    unset): K's matrix is the largest power of two dividing the head size, V's 64 wide."""
    k, v = (t.lower() not in _PLAIN_TYPES for t in cache_types)
    side = 64
    while k and head_dim % (2 * side) == 0:
        side *= 2
    return (side if k and head_dim % 64 == 0 else 0, 64 if v and v_head_dim % 64 == 0 else 0)


def cpu_graph_bytes(
    spec: ModelSpec,
    *,
    cells: dict[str, int],
    streams: int,
    n_tokens: int,
    flash_attn: bool,
    moe: MoE | None = None,
    cache_types: tuple[str, str] = ("f16", "f16"),
) -> int | None:
    """The compute buffer of a model on the CPU backend, byte for byte: the peak of ggml's
    graph allocator over llama.cpp's prompt graph of ``n_tokens = min(n_ctx, n_ubatch)``
    tokens (rounded up to a multiple of the ``streams``); ``cells`` holds the KV cells per
    stream of each cache part (``"full"``, ``"swa"``; MLA layers are ``"full"``); ``moe``
    the experts of a model type that may route (qwen3moe, deepseek2), as
    ``llamacpp_budget.moe_from_gguf`` reads them; ``cache_types`` the K and V cache types
    (``-ctk``, ``-ctv``: an f32 cache is cast for flash attention, a quantized one rotated).
    ``None`` where the graph is not modelled here: a model type outside ``DECODER_GRAPHS``, a
    cache other than full, sliding-window and MLA attention, or such an MoE without ``moe``."""
    from kvplan.model.layers import FullAttention, MLALatent, SlidingWindowAttention

    kinds = [
        "swa" if type(layer) is SlidingWindowAttention else "full"
        for layer in spec.layers
        if type(layer) in (FullAttention, SlidingWindowAttention, MLALatent)
    ]
    mla = next((layer for layer in spec.layers if isinstance(layer, MLALatent)), None)
    flags = DECODER_GRAPHS.get(spec.model_type or "")
    known = len(kinds) == len(spec.layers) > 0 and all(kind in cells for kind in kinds)
    if spec.model_type in _MOE_TYPES:
        if moe is None:  # the experts' shape is not in the spec: the caller gives it
            return None
        moe = moe if moe.num_experts else None
    elif moe is not None and moe.num_experts:  # a llama file with experts (Mixtral): not built
        return None
    if flags is None or not known:
        return None
    embd, vocab, heads, ffn = _dims(spec)
    head_dim = spec.head_dim or embd // heads
    shapes = _Shapes(
        tokens=-(-n_tokens // streams) * streams,
        embd=embd,
        heads=heads,
        kv_heads=spec.num_key_value_heads or heads,
        head_dim=head_dim,
        v_head_dim=spec.v_head_dim or head_dim,
        qk_norm=flags[0],
        ffn=ffn,
        moe=moe,
        flash_attn=flash_attn,
        gemma=flags[1],
        mla=(mla.kv_lora_rank, spec.qk_nope_head_dim or 0, mla.qk_rope_head_dim) if mla else None,
        cache_bytes=4 if cache_types[0] == "f32" else 2,
        streams=streams,
        q_lora=spec.q_lora_rank or 0 if mla else 0,
        rot=(0, 0) if mla else _rotations(cache_types, head_dim, spec.v_head_dim or head_dim),
        cast=(cache_types[0] == "f32", cache_types[1] == "f32"),
    )
    graph = _decoder_graph(shapes, kinds=kinds, cells=cells, vocab=vocab, outputs=n_tokens)
    return graph_peak_bytes(graph)
