"""llama.cpp's compute buffers on a GPU (CUDA, Metal) and their host companion: estimates.

The compute buffer is the peak of ggml's graph allocator over the reserved graphs; tensors
are freed as soon as the last node reading them ran, so the peak is one layer's live
activations or the logits, never a sum over layers (it does not grow with ``-ngl``). With
``T = min(n_ubatch, n_batch)`` tokens of a prompt micro-batch and ``cells`` KV cells per
stream, all f32 (4 bytes):

- on the device that holds the output layer: the logits and the normed hidden state,
  ``T x (n_vocab + n_embd) x 4``;
- attention without flash attention: the scores, the mask and four ``T x n_embd`` tensors (query,
  key and value projections, output), ``T x cells x (heads + 1) x 4 + 4 x T x n_embd x 4``;
  with it, the f16 mask and the query, output and residual: ``T x cells x 2 + 3 x T x n_embd x 4``;
- the MLP: ``T x (3 x n_ff + 2 x n_embd) x 4``.

The GPU's buffer is the largest of the terms it has; the host's (``CUDA_Host``) holds the
embedded input and the mask: ``T x n_embd x 4 + T x cells x (4, or 2 with flash attention)``.

Fitted to public logs of Llama 3 8B (n_vocab 128,256, n_embd 4,096, 32 heads), all 33 layers
on CUDA0, ``-ub 512 -fa off``:

- ``-c 512``: printed ``CUDA0 compute buffer size = 258.50 MiB``, ``CUDA_Host ... = 9.01 MiB``
  (a llama-cpp-python user's log); the logits term 512 x 132,352 x 4 = 258.50 MiB (error 0),
  the host 8 + 1 = 9.00 MiB (error -0.01 MiB);
- ``-c 8192``: printed ``560.00 MiB`` and ``24.01 MiB`` (Ollama logs, 2024 and 2025); the
  attention term 512 x 8,192 x 33 x 4 + 4 x 512 x 4,096 x 4 = 528 + 32 = 560.00 MiB (error
  0), the host 8 + 16 = 24.00 MiB (error -0.01 MiB).

Other graphs (MoE routing, hybrid recurrent layers, vision towers) add
terms this rule does not model: treat it as the order of magnitude there, and keep the
headroom (``--fit-target``, 1 GiB by default) that llama.cpp's own ``--fit`` keeps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvplan.spec import ModelSpec

__all__ = ["gpu_compute_bytes", "host_compute_bytes"]


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
    """Estimated bytes of one GPU's compute buffer (see the module docstring)."""
    embd, vocab, heads, ffn = _dims(spec)
    t = n_ubatch
    terms = [t * embd * 4]
    if holds_output:
        terms.append(t * (vocab + embd) * 4)
    if holds_layers:
        if flash_attn:
            terms.append(t * cells * 2 + 3 * t * embd * 4)
        else:
            terms.append(t * cells * (heads + 1) * 4 + 4 * t * embd * 4)
        terms.append(t * (3 * ffn + 2 * embd) * 4)
    return max(terms)


def host_compute_bytes(spec: ModelSpec, *, cells: int, n_ubatch: int, flash_attn: bool) -> int:
    """Estimated bytes of the host's compute buffer next to a GPU (``CUDA_Host``)."""
    embd = spec.hidden_size or 0
    return n_ubatch * embd * 4 + n_ubatch * cells * (2 if flash_attn else 4)
