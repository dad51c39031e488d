"""GGUF input: header-only import, exact weight bytes, llama.cpp's layer layouts, hostile files.

Files are written in tmp_path with llama.cpp's own ``gguf`` writer: the header and tensor table
only, the data section left as a hole (``truncate``), so a multi-GiB model costs no disk.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kvplan.errors import SpecError
from kvplan.importers.config import spec_yaml
from kvplan.importers.gguf import GGUFImported, import_gguf, is_gguf
from kvplan.importers.gguf_format import GGML_TYPES, read_gguf_header
from kvplan.model.layers import FullAttention, MLALatent, SlidingWindowAttention
from kvplan.model.spec import parse_spec

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")

T = gguf.GGMLQuantizationType
ALIGN = 32


def _pad(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _add_key(w: Any, key: str, value: Any) -> None:
    V = gguf.GGUFValueType
    if isinstance(value, str):
        w.add_string(key, value)
    elif isinstance(value, list):
        w.add_array(key, value)
    else:
        w.add_key_value(key, value, V.UINT32)


def write_gguf(
    path: Path,
    arch: str,
    keys: dict[str, Any],
    tensors: list[tuple[str, tuple[int, ...], Any]],
    *,
    num_tokens: int = 0,
    split_max_tensors: int = 0,
) -> list[Path]:
    """A GGUF file (or split files): metadata, a tensor table of (name, shape in numpy order,
    ggml type), and a data section that is a hole. Returns the paths written."""
    w = gguf.GGUFWriter(path, arch, split_max_tensors=split_max_tensors)
    for key, value in keys.items():
        _add_key(
            w,
            key
            if "." in key and key.split(".")[0] in ("general", "tokenizer")
            else f"{arch}.{key}",
            value,
        )
    if num_tokens:
        w.add_token_list([f"t{i}" for i in range(num_tokens)])
    for name, shape, kind in tensors:
        block, size = gguf.GGML_QUANT_SIZES[kind]
        n = int(np.prod(shape))
        w.add_tensor_info(name, shape, np.dtype(np.float32), n // block * size, raw_dtype=kind)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    paths = w.format_shard_names(Path(path))
    w.close()
    for part, infos in zip(paths, w.tensors, strict=True):
        data = sum(_pad(ti.nbytes) for ti in infos.values())
        os.truncate(part, _pad(part.stat().st_size) + data)
    return paths


def _llama_keys(layers: int = 2) -> dict[str, Any]:
    return {
        "block_count": layers,
        "embedding_length": 4096,
        "attention.head_count": 32,
        "attention.head_count_kv": 8,
        "context_length": 8192,
        "feed_forward_length": 14336,
        "general.file_type": 15,
    }


def _llama_tensors(layers: int = 2) -> list[tuple[str, tuple[int, ...], Any]]:
    tensors = [("token_embd.weight", (32000, 4096), T.Q4_K)]
    for i in range(layers):
        tensors += [
            (f"blk.{i}.attn_q.weight", (4096, 4096), T.Q4_K),
            (f"blk.{i}.attn_k.weight", (1024, 4096), T.Q8_0),
            (f"blk.{i}.attn_norm.weight", (4096,), T.F32),
        ]
    return [
        *tensors,
        ("output_norm.weight", (4096,), T.F32),
        ("output.weight", (32000, 4096), T.Q6_K),
    ]


@pytest.fixture
def llama(tmp_path: Path) -> Path:
    return write_gguf(
        tmp_path / "Tiny-Llama-Q4_K_M.gguf",
        "llama",
        _llama_keys(),
        _llama_tensors(),
        num_tokens=32000,
    )[0]


# --- the ggml type table -----------------------------------------------------------------------


def test_type_table_matches_llama_cpp_gguf_package() -> None:
    theirs = {int(t): (t.name, *gguf.GGML_QUANT_SIZES[t]) for t in gguf.GGMLQuantizationType}
    assert theirs == GGML_TYPES


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (T.Q4_K, 4096 * 4096 // 256 * 144),  # 65,536 blocks x 144 B = 9,437,184 B
        (T.Q8_0, 4096 * 4096 // 32 * 34),  # 524,288 blocks x 34 B = 17,825,792 B
        (T.IQ4_XS, 4096 * 4096 // 256 * 136),  # 65,536 x (2 + 2 + 128 + 4) = 8,912,896 B
        (T.MXFP4, 4096 * 4096 // 32 * 17),  # 524,288 x (16 B of e2m1 + 1 B e8m0) = 8,912,896 B
        (T.BF16, 4096 * 4096 * 2),  # 33,554,432 B
        (T.Q6_K, 4096 * 4096 // 256 * 210),  # 65,536 x (128 + 64 + 16 + 2) = 13,762,560 B
        (T.TQ2_0, 4096 * 4096 // 256 * 66),  # 65,536 x (64 + 2) = 4,325,376 B
    ],
    ids=[
        "q4_k 9437184",
        "q8_0 17825792",
        "iq4_xs 8912896",
        "mxfp4 8912896",
        "bf16 33554432",
        "q6_k 13762560",
        "tq2_0 4325376",
    ],
)
def test_tensor_bytes_per_type(tmp_path: Path, kind: Any, expected: int) -> None:
    path = write_gguf(
        tmp_path / "m.gguf", "llama", _llama_keys(1), [("blk.0.attn_q.weight", (4096, 4096), kind)]
    )[0]
    (tensor,) = read_gguf_header(path).tensors
    assert tensor.num_bytes == expected
    assert tensor.shape == (4096, 4096)
    assert tensor.ggml_type == kind.name


# --- llama: geometry and weights ---------------------------------------------------------------


def test_llama_geometry_and_exact_weights(llama: Path) -> None:
    imported = import_gguf(llama)
    assert isinstance(imported, GGUFImported)
    spec = imported.spec
    assert (spec.num_hidden_layers, spec.num_attention_heads, spec.kv_heads) == (2, 32, 8)
    assert spec.layers[0] == FullAttention(8, 128, 128)  # 4096 / 32 heads = 128
    assert spec.max_position_embeddings == 8192
    assert spec.vocab_size == 32000
    assert spec.tie_word_embeddings is False
    assert spec.name == "tiny-llama-q4_k_m"
    w = imported.weights
    layer = 9_437_184 + 1024 * 4096 // 32 * 34 + 4096 * 4  # Q4_K q + Q8_0 k (4,456,448) + F32 norm
    assert w.layer_bytes == (layer, layer) == (13_910_016, 13_910_016)
    assert w.token_embd_bytes == 32000 * 4096 // 256 * 144 == 73_728_000
    assert w.output_bytes == 32000 * 4096 // 256 * 210 == 107_520_000
    assert w.other_bytes == 4096 * 4
    assert w.total_bytes == 73_728_000 + 107_520_000 + 2 * 13_910_016 + 16_384
    # parameters: 2 embeddings of 32000 x 4096, per layer 4096^2 + 1024 x 4096 + 4096, one norm
    assert spec.num_parameters == 2 * 131_072_000 + 2 * (16_777_216 + 4_194_304 + 4096) + 4096
    assert "Q4_K_M" in imported.data["source"]


def test_yaml_round_trips(llama: Path) -> None:
    import yaml

    imported = import_gguf(llama)
    again = parse_spec(yaml.safe_load(spec_yaml(imported)))
    assert again == imported.spec


def test_tied_head_and_vocab_from_embedding(tmp_path: Path) -> None:
    tensors = [t for t in _llama_tensors(1) if t[0] != "output.weight"]
    path = write_gguf(tmp_path / "tied.gguf", "llama", _llama_keys(1), tensors)[0]
    imported = import_gguf(path)
    assert imported.spec.tie_word_embeddings is True
    assert imported.spec.vocab_size == 32000  # token_embd.weight is 4096 x 32000 (ggml order)
    assert imported.weights.output_bytes == 0


def test_multi_gib_file_answers_from_its_header_alone(llama: Path) -> None:
    os.truncate(llama, 20 * 2**30)  # 20 GiB, a hole after the header
    start = time.perf_counter()
    import_gguf(llama)
    assert time.perf_counter() - start < 1.0


def test_importing_gguf_needs_neither_numpy_nor_gguf() -> None:
    code = (
        "import sys, kvplan.importers.gguf;"
        " print(sorted(m for m in ('numpy', 'gguf') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_is_gguf(llama: Path, tmp_path: Path) -> None:
    assert is_gguf("models/Qwen3-8B-Q4_K_M.gguf")
    assert is_gguf("X.GGUF")
    assert not is_gguf("config.json")
    blob = tmp_path / "sha256-0123abcd"  # an Ollama blob: GGUF without the suffix
    blob.write_bytes(llama.read_bytes()[:64])
    assert is_gguf(blob)
    assert not is_gguf(tmp_path)


# --- architectures -----------------------------------------------------------------------------


def test_qwen3_states_head_dim(tmp_path: Path) -> None:
    keys = {
        **_llama_keys(1),
        "embedding_length": 2560,
        "attention.key_length": 128,
        "attention.value_length": 128,
    }
    path = write_gguf(
        tmp_path / "q.gguf", "qwen3", keys, [("blk.0.attn_q.weight", (4096, 2560), T.Q8_0)]
    )[0]
    spec = import_gguf(path).spec
    assert spec.model_type == "qwen3"
    assert spec.layers[0] == FullAttention(8, 128, 128)  # stated 128, not 2560 / 32 = 80


def test_gemma3_five_sliding_one_global(tmp_path: Path) -> None:
    keys = {
        **_llama_keys(12),
        "attention.key_length": 256,
        "attention.value_length": 256,
        "attention.sliding_window": 512,
    }
    path = write_gguf(
        tmp_path / "g.gguf", "gemma3", keys, [("blk.0.attn_q.weight", (256, 256), T.BF16)]
    )[0]
    imported = import_gguf(path)
    kinds = [type(layer).__name__ for layer in imported.spec.layers]
    # llama.cpp set_swa_pattern(6): layer i slides when i % 6 < 5 -> layers 5 and 11 are global
    assert [i for i, k in enumerate(kinds) if k == "FullAttention"] == [5, 11]
    assert imported.spec.layers[0] == SlidingWindowAttention(8, 256, 256, window=512)
    assert imported.data["layer_types_pattern"] == ["sliding_attention"] * 5 + ["full_attention"]
    assert imported.spec.model_type == "gemma3_text"


def test_gemma2_default_window(tmp_path: Path) -> None:
    path = write_gguf(
        tmp_path / "g2.gguf", "gemma2", _llama_keys(4), [("blk.0.x.weight", (32,), T.F32)]
    )[0]
    spec = import_gguf(path).spec
    assert [type(x).__name__ for x in spec.layers] == [
        "SlidingWindowAttention",
        "FullAttention",
    ] * 2
    assert spec.sliding_window == 4096  # llama.cpp's Gemma 2 default when the key is absent


@pytest.mark.parametrize("arch", ["gpt-oss", "gptoss"])
def test_gpt_oss_alternates(tmp_path: Path, arch: str) -> None:
    keys = {
        **_llama_keys(4),
        "attention.key_length": 64,
        "attention.value_length": 64,
        "attention.sliding_window": 128,
        "expert_count": 32,
    }
    tensors = [("blk.0.ffn_up_exps.weight", (32, 2880, 2880), T.MXFP4)]
    path = write_gguf(tmp_path / "oss.gguf", arch, keys, tensors)[0]
    imported = import_gguf(path)
    assert imported.spec.layer_types_pattern == ("sliding_attention", "full_attention")
    assert imported.spec.layers[0] == SlidingWindowAttention(8, 64, 64, window=128)
    assert imported.weights.layer_bytes[0] == 32 * 2880 * 2880 // 32 * 17 == 141_004_800


def test_deepseek2_mla(tmp_path: Path) -> None:
    keys = {
        "block_count": 3,
        "embedding_length": 7168,
        "attention.head_count": 128,
        "attention.head_count_kv": 1,
        "attention.key_length": 576,
        "attention.value_length": 512,
        "attention.key_length_mla": 192,
        "attention.value_length_mla": 128,
        "attention.kv_lora_rank": 512,
        "attention.q_lora_rank": 1536,
        "rope.dimension_count": 64,
        "context_length": 163840,
    }
    path = write_gguf(
        tmp_path / "ds.gguf",
        "deepseek2",
        keys,
        [("blk.0.attn_kv_a_mqa.weight", (576, 7168), T.Q8_0)],
    )[0]
    spec = import_gguf(path).spec
    assert spec.layers[0] == MLALatent(512, 64)  # one latent of 512 + 64 values per token
    assert (spec.qk_nope_head_dim, spec.v_head_dim, spec.q_lora_rank) == (128, 128, 1536)
    assert spec.num_key_value_heads == 128


def test_nemotron_h_layers_from_per_layer_heads(tmp_path: Path) -> None:
    keys = {
        "block_count": 4,
        "embedding_length": 4096,
        "attention.head_count": 32,
        "attention.head_count_kv": [0, 0, 8, 0],
        "feed_forward_length": [0, 21504, 0, 0],
        "ssm.conv_kernel": 4,
        "ssm.state_size": 128,
        "ssm.inner_size": 8192,
        "ssm.time_step_rank": 128,
        "ssm.group_count": 8,
        "context_length": 8192,
    }
    path = write_gguf(
        tmp_path / "nh.gguf", "nemotron_h", keys, [("blk.0.ssm_in.weight", (64,), T.F32)]
    )[0]
    spec = import_gguf(path).spec
    assert spec.layer_types == ("mamba", "no_cache", "full_attention", "mamba")
    assert (spec.mamba_n_heads, spec.mamba_d_head, spec.mamba_n_groups) == (
        128,
        64,
        8,
    )  # 8192 / 128
    state = spec.layers[0]
    # conv (8192 + 2 x 8 x 128) x 3 = 30,720 values; ssm 8192 x 128 = 1,048,576 values
    assert (state.conv_values, state.ssm_values) == (30_720, 1_048_576)  # type: ignore[attr-defined]


def test_phi3_window_is_not_used_by_llama_cpp(tmp_path: Path) -> None:
    keys = {**_llama_keys(2), "attention.sliding_window": 2047}
    path = write_gguf(tmp_path / "phi.gguf", "phi3", keys, [("blk.0.x.weight", (32,), T.F32)])[0]
    imported = import_gguf(path)
    assert all(isinstance(x, FullAttention) for x in imported.spec.layers)
    assert any("not used" in note for note in imported.notes)


def test_varying_kv_heads_refused(tmp_path: Path) -> None:
    keys = {**_llama_keys(2), "attention.head_count_kv": [8, 4]}
    path = write_gguf(tmp_path / "v.gguf", "llama", keys, [("blk.0.x.weight", (32,), T.F32)])[0]
    with pytest.raises(SpecError, match="head_count_kv: differs across attention layers"):
        import_gguf(path)


def test_unmapped_architecture_fails_closed(tmp_path: Path) -> None:
    path = write_gguf(
        tmp_path / "b.gguf", "bert", _llama_keys(1), [("blk.0.x.weight", (32,), T.F32)]
    )[0]
    with pytest.raises(SpecError) as e:
        import_gguf(path)
    message = str(e.value)
    assert "\n" not in message
    assert str(path) in message
    assert "'bert' is not a GGUF architecture kvplan maps; supported:" in message
    assert "gemma3" in message


# --- split files -------------------------------------------------------------------------------


def test_split_files_read_every_part(tmp_path: Path) -> None:
    parts = write_gguf(
        tmp_path / "big.gguf", "llama", _llama_keys(), _llama_tensors(), split_max_tensors=5
    )  # 9 tensors: 5 + 4
    assert [p.name for p in parts] == ["big-00001-of-00002.gguf", "big-00002-of-00002.gguf"]
    whole = import_gguf(
        write_gguf(tmp_path / "one.gguf", "llama", _llama_keys(), _llama_tensors())[0]
    )
    for part in parts:  # any part names the model
        imported = import_gguf(part)
        assert imported.weights.total_bytes == whole.weights.total_bytes
        assert imported.weights.layer_bytes == whole.weights.layer_bytes
        assert imported.spec.num_parameters == whole.spec.num_parameters
        assert imported.spec.name == "big"
    parts[1].unlink()
    with pytest.raises(SpecError, match=r"part big-00002-of-00002\.gguf is missing"):
        import_gguf(parts[0])


# --- hostile files -----------------------------------------------------------------------------


def _raw(tmp_path: Path, body: bytes, name: str = "bad.gguf") -> Path:
    path = tmp_path / name
    path.write_bytes(body)
    return path


def _s(text: str) -> bytes:
    return struct.pack("<Q", len(text)) + text.encode()


def _one_line_error(path: Path, fragment: str) -> None:
    with pytest.raises(SpecError) as e:
        import_gguf(path)
    message = str(e.value)
    assert "\n" not in message, message
    assert message.startswith(str(path)), message
    assert fragment in message, message


def test_bad_magic(tmp_path: Path) -> None:
    _one_line_error(_raw(tmp_path, b'{"model_type": "llama", "x": 1}\n'), "not a GGUF file")


def test_absurd_tensor_count(tmp_path: Path) -> None:
    body = b"GGUF" + struct.pack("<IQQ", 3, 2**60, 0)
    _one_line_error(_raw(tmp_path, body), "tensor count 1,152,921,504,606,846,976 is more than")


def test_string_longer_than_the_file(tmp_path: Path) -> None:
    body = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 2**40) + b"general"
    _one_line_error(_raw(tmp_path, body), "length of a key name 1,099,511,627,776")


def test_array_longer_than_the_file(tmp_path: Path) -> None:
    body = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _s("tokenizer.ggml.tokens")
    body += struct.pack("<IIQ", 9, 8, 2**50)
    _one_line_error(_raw(tmp_path, body), "length of array 'tokenizer.ggml.tokens'")


def test_unknown_ggml_type(tmp_path: Path) -> None:
    body = (
        b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + _s("blk.0.w") + struct.pack("<IQIQ", 1, 32, 99, 0)
    )
    _one_line_error(_raw(tmp_path, body + bytes(64)), "ggml type 99 is not one kvplan knows")


def test_old_version(tmp_path: Path) -> None:
    _one_line_error(_raw(tmp_path, b"GGUF" + struct.pack("<IQQ", 1, 0, 0)), "GGUF version 1")


def test_truncated_data_names_the_tensor(llama: Path) -> None:
    os.truncate(llama, llama.stat().st_size - 1)
    _one_line_error(llama, "truncated: tensor output.weight ends at byte")


def test_every_truncated_header_is_one_error_line(tmp_path: Path) -> None:
    path = write_gguf(
        tmp_path / "t.gguf", "qwen3", _llama_keys(1), [("blk.0.attn_q.weight", (256, 256), T.Q4_K)]
    )[0]
    header = path.read_bytes()[: _pad(read_gguf_header(path).data_offset)]
    for cut in range(0, len(header), 7):
        _one_line_error(_raw(tmp_path, header[:cut], "cut.gguf"), "")


def test_missing_folder_and_fifo(tmp_path: Path) -> None:
    _one_line_error(tmp_path / "absent.gguf", "cannot read")
    folder = tmp_path / "dir.gguf"
    folder.mkdir()
    _one_line_error(folder, "is a folder")
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "fifo.gguf"
        os.mkfifo(fifo)
        _one_line_error(fifo, "not a regular file")


# --- through the CLI: every command that takes a MODEL reads the file -------------------------

# The tiny llama's tensors, by hand (bytes = elements / block * bytes per block):
#   token_embd Q4_K 32000x4096: 131,072,000 / 256 * 144 = 73,728,000
#   per layer: attn_q Q4_K 4096x4096 = 9,437,184; attn_k Q8_0 1024x4096 = 4,194,304 / 32 * 34
#   = 4,456,448; attn_norm f32 4096 x 4 = 16,384 -> 13,910,016, two layers 27,820,032
#   output_norm f32 16,384; output Q6_K 32000x4096: 131,072,000 / 256 * 210 = 107,520,000
TINY_LLAMA_WEIGHT_BYTES = 73_728_000 + 27_820_032 + 16_384 + 107_520_000  # 209,084,416


def test_plan_sizes_weights_from_the_tensor_table(llama: Path) -> None:
    import json

    from typer.testing import CliRunner

    from kvplan.cli import app

    args = ["plan", str(llama), "--gpu", "l4", "--max-model-len", "8K", "--format", "json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["weights_bytes"] == TINY_LLAMA_WEIGHT_BYTES
    assert "Q4_K_M" in doc["weights_format"]
    # A re-format (--quantization) sizes from the parameter count again, as for any spec.
    result = CliRunner().invoke(app, [*args, "--quantization", "fp8"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["weights_bytes"] != TINY_LLAMA_WEIGHT_BYTES


def test_import_writes_a_spec_that_loads_back(llama: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from kvplan.cli import app
    from kvplan.model.weights import model_weights

    out = tmp_path / "tiny.yaml"
    result = CliRunner().invoke(app, ["import", str(llama), "-o", str(out)])
    assert result.exit_code == 0, result.output
    spec = parse_spec(__import__("yaml").safe_load(out.read_text()), str(out))
    assert spec.stored_weight_bytes is not None
    assert spec.stored_weight_bytes.layers_bytes == (13_910_016, 13_910_016)
    assert model_weights(spec).total_bytes == TINY_LLAMA_WEIGHT_BYTES


# --- the model's name: general.name, shown safely ----------------------------------------------


@pytest.mark.parametrize(
    ("general_name", "expected"),
    [
        ("Meta Llama 3.1 8B Instruct", "meta-llama-3.1-8b-instruct"),
        ("Qwen3 235B A22B", "qwen3-235b-a22b"),
        ("  Mistral/Small 24B  ", "mistral-small-24b"),
        # markup and control characters are never printed: each run becomes one dash
        ("[bold]Evil[/bold]\nname\x1b[31m", "bold-evil-bold-name-31m"),
        # 200 letters: cut at 96
        ("x" * 200, "x" * 96),
        # nothing printable: the file name (Tiny-Llama-Q4_K_M.gguf)
        ("[ ]  \t", "tiny-llama-q4_k_m"),
        ("", "tiny-llama-q4_k_m"),
    ],
    ids=["llama", "qwen", "slash", "markup", "long", "punctuation", "empty"],
)
def test_name_is_general_name(tmp_path: Path, general_name: str, expected: str) -> None:
    keys = {**_llama_keys(), "general.name": general_name}
    path = write_gguf(tmp_path / "Tiny-Llama-Q4_K_M.gguf", "llama", keys, _llama_tensors())[0]
    imported = import_gguf(path)
    assert imported.spec.name == expected
    stated = expected != "tiny-llama-q4_k_m"
    assert (f"name {expected}: general.name" in imported.data["source"]) is stated
    assert import_gguf(path, "mine").spec.name == "mine"  # --name wins


def test_name_without_general_name_is_the_file_stem(llama: Path) -> None:
    assert "general.name" not in read_gguf_header(llama).metadata
    assert import_gguf(llama).spec.name == "tiny-llama-q4_k_m"


def test_cli_names_gguf_after_general_name(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from kvplan.cli import app

    keys = {**_llama_keys(), "general.name": "Meta Llama 3.1 8B Instruct"}
    path = write_gguf(tmp_path / "model-q4.gguf", "llama", keys, _llama_tensors())[0]
    runner = CliRunner()
    result = runner.invoke(app, ["import", str(path)])
    assert result.exit_code == 0, result.output
    assert "\nname: meta-llama-3.1-8b-instruct\n" in result.stdout
    result = runner.invoke(app, ["calc", str(path), "-c", "1K"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("meta-llama-3.1-8b-instruct")


def test_gguf_spec_yaml_is_block_style(llama: Path) -> None:
    import yaml

    text = spec_yaml(import_gguf(llama))
    assert "{" not in text
    # the exact weights as a block mapping under their key, each layer's bytes on one line
    assert "\nstored_weight_bytes:\n  embedding_bytes: 73728000\n" in text
    assert "\n  layers_bytes: [13910016, 13910016]\n" in text
    assert parse_spec(yaml.safe_load(text)) == import_gguf(llama).spec
