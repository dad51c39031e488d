"""Expert parallelism splits the routed experts exactly: ``num_expert_parameters`` from the
config's shapes or the safetensors names, sized in the format the experts are stored in, and
what each expert-parallel rank then holds."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import pytest

from kvplan.catalog.lookup import load_model, specs_dir
from kvplan.hardware.lookup import find_gpu
from kvplan.importers import import_config, parameters_from_config
from kvplan.importers.safetensors import count_parameters
from kvplan.model.spec import ModelSpec, parse_spec
from kvplan.model.weights import model_weights
from kvplan.planner.api import plan_cluster
from kvplan.planner.deployment import Deployment
from kvplan.planner.pool import routed_expert_bytes, stage_plans

FIXTURES = Path(__file__).parent / "fixtures" / "hf"

# The routed experts, layers x experts x (gate, up, down) x hidden x expert width:
DEEPSEEK_V3 = 58 * 256 * 3 * 7168 * 2048  # layers 3-60 are MoE: 653,908,770,816
GPT_OSS_120B = 36 * 128 * 3 * 2880 * 2880  # gate_up 2 x 2880, down 2880: 114,661,785,600
QWEN3_235B = 94 * 128 * 3 * 4096 * 1536  # every layer MoE: 227,096,395,776
KIMI_K25 = 60 * 384 * 3 * 7168 * 2048  # layers 1-60 are MoE: 1,014,686,023,680


def _without_key(spec: ModelSpec) -> ModelSpec:
    return spec.model_copy(update={"num_expert_parameters": None})


@pytest.mark.parametrize(
    ("name", "num_experts", "num_bytes"),
    [
        pytest.param(
            "deepseek-v3",
            DEEPSEEK_V3,
            DEEPSEEK_V3 // 16_384 * 16_388,
            id="deepseek-v3: 58*256*3*7168*2048 fp8 in 128x128 blocks + fp32 scale"
            " = /16384*16388 = 654,068,416,512 B",
        ),
        pytest.param(
            "gpt-oss-120b",
            GPT_OSS_120B,
            GPT_OSS_120B // 32 * 17,
            id="gpt-oss-120b: 36*128*3*2880^2 mxfp4 = /32*17 = 60,914,073,600 B",
        ),
        pytest.param(
            "qwen3-235b-a22b",
            QWEN3_235B,
            QWEN3_235B * 2,
            id="qwen3-235b-a22b: 94*128*3*4096*1536 bf16 = x2 = 454,192,791,552 B",
        ),
        pytest.param(
            "kimi-k2.5",
            KIMI_K25,
            KIMI_K25 // 128 * 66,
            id="kimi-k2.5: 60*384*3*7168*2048 int4 group 128 = /128*66 = 523,197,480,960 B",
        ),
    ],
)
def test_routed_experts_are_sized_in_their_stored_format(
    name: str, num_experts: int, num_bytes: int
) -> None:
    spec = load_model(name)
    assert spec.num_expert_parameters == num_experts
    assert routed_expert_bytes(spec, model_weights(spec)) == num_bytes
    assert (DEEPSEEK_V3 // 16_384 * 16_388, GPT_OSS_120B // 32 * 17) == (
        654_068_416_512,
        60_914_073_600,
    )


@pytest.mark.parametrize(
    ("quantization", "num_bytes"),
    [
        pytest.param("fp8", QWEN3_235B, id="fp8: 1 B each = 227,096,395,776 B"),
        pytest.param("mxfp4", QWEN3_235B // 32 * 17, id="mxfp4: /32*17 = 120,644,960,256 B"),
        pytest.param("int4", QWEN3_235B // 128 * 66, id="int4: /128*66 = 117,096,579,072 B"),
    ],
)
def test_quantization_reformats_the_experts(quantization: str, num_bytes: int) -> None:
    spec = load_model("qwen3-235b-a22b")
    assert routed_expert_bytes(spec, model_weights(spec, quantization=quantization)) == num_bytes


def test_without_the_key_the_bound_of_the_parameters_no_token_uses() -> None:
    # DeepSeek V3 as the card counts it: 671e9 total, 37e9 active; embeddings 129,280 x 7,168
    # = 926,679,040 each, untied. Layers: 669,065,609,216 fp8 (/16,384 x 16,388) + 81,032,704
    # bf16 = 669,228,955,312 + 162,065,408 = 669,391,020,720 B.
    spec = _without_key(load_model("deepseek-v3"))
    w = model_weights(spec)
    layer_params = 671_000_000_000 - 2 * 926_679_040
    assert w.layers_bytes == 669_065_609_216 // 16_384 * 16_388 + 2 * 81_032_704
    assert routed_expert_bytes(spec, w) == w.layers_bytes * 634_000_000_000 // layer_params
    assert routed_expert_bytes(load_model("llama-3.1-8b"), w) == 0  # dense


def test_stored_weights_split_pro_rata() -> None:
    # A GGUF-style spec: 2 layers of 1,000 B and 3,000 B, no per-tensor formats kept;
    # embeddings 100 x 64 = 6,400 each side, so layer parameters 106,400 - 12,800 = 93,600;
    # experts 46,800 of them: 4,000 x 46,800 / 93,600 = 2,000 B.
    spec = parse_spec(
        {
            "name": "tiny-moe",
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "hidden_size": 64,
            "vocab_size": 100,
            "torch_dtype": "bfloat16",
            "num_parameters": 106_400,
            "num_active_parameters": 60_000,
            "num_expert_parameters": 46_800,
            "stored_weight_bytes": {
                "embedding_bytes": 500,
                "layers_bytes": [1_000, 3_000],
                "output_bytes": 700,
                "format": "Q4_K_M",
            },
        }
    )
    assert routed_expert_bytes(spec, model_weights(spec)) == 2_000


def test_rank_weights_drop_by_what_the_bound_over_counted() -> None:
    # DeepSeek V3, DP-attention + EP 16 on H100 (TP 1, PP 1): a rank holds the embeddings and
    # head (2 x 1,853,358,080), the layers less the experts, and 1/16 of the experts.
    #   exact: experts 654,068,416,512 B; 669,391,020,720 - 654,068,416,512 + 3,706,716,160
    #          = 19,029,320,368, + 654,068,416,512 / 16 = 40,879,276,032 -> 59,908,596,400
    #   bound: experts 669,391,020,720 x 634e9 // 669,146,641,920 = 634,231,542,907 B;
    #          38,866,193,973 + cdiv(634,231,542,907, 16) = 39,639,471,432 -> 78,505,665,405
    # The bound kept 654,068,416,512 - 634,231,542,907 = 19,836,873,605 B of experts whole on
    # every rank; at EP 16 a rank holds 15/16 of it less: 18,597,069,005 B.
    gpu = find_gpu("h100")
    spec = load_model("deepseek-v3")
    exact = Deployment(spec, gpu, expert_parallel_size=16)
    bound = Deployment(_without_key(spec), gpu, expert_parallel_size=16)
    (rank, *_), _, _ = stage_plans(exact, exact.cache_dtypes(), 32_768)
    (old, *_), _, _ = stage_plans(bound, bound.cache_dtypes(), 32_768)
    assert rank.weights_bytes == 19_029_320_368 + 40_879_276_032 == 59_908_596_400
    assert old.weights_bytes == 38_866_193_973 + 39_639_471_432 == 78_505_665_405
    assert old.weights_bytes - rank.weights_bytes == 18_597_069_005
    # usable 0.9 x 85,029,027,840 = 76,526,125,056 B, overhead 4,280,287,232 B: the bound left
    # no pool (78.5 GB of weights); exact, 12,337,241,424 B hold 5 MLA requests of 32,768
    # tokens (61 x 576 x 2 B x 32,768 = 2,302,672,896 B each; 6 would take 13,816,037,376)
    assert old.kv_cache_memory_bytes == 0
    assert rank.kv_cache_memory_bytes == 76_526_125_056 - 59_908_596_400 - 4_280_287_232
    assert rank.request_bytes == 61 * 576 * 2 * 32_768
    assert rank.max_concurrency == 5


def test_int4_experts_weigh_less_than_their_share_of_the_layers() -> None:
    # Kimi K2.5 stores its experts in int4 (66 B per 128) and the rest in bf16: pro rata of
    # the layers' bytes, the bound took the experts at the layers' mean width and split more
    # bytes than they hold. Exact, each rank keeps more: the bf16 share stays whole.
    spec = load_model("kimi-k2.5")
    w = model_weights(spec)
    assert routed_expert_bytes(spec, w) == KIMI_K25 // 128 * 66
    assert routed_expert_bytes(_without_key(spec), w) > KIMI_K25 // 128 * 66


def test_deepseek_v3_at_32k_for_64_fits_two_nodes() -> None:
    # the first case of the cluster planner: 16 ranks x 5 requests (above) = 80 >= 64 on two
    # HGX H100 nodes; with the bound's 78.5 GB of weights a rank needed EP 32 (four nodes).
    found = plan_cluster("deepseek-v3", "h100", max_model_len="32K", concurrency=64)
    best = found.best
    assert best is not None
    p = best.plan
    assert (p.expert_parallel_size, p.tensor_parallel_size, p.pipeline_parallel_size) == (16, 1, 1)
    assert (best.billed_gpus, best.num_nodes, best.held_requests) == (16, 2, 16 * 5)


# --- where the count comes from ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "num_experts"),
    [("deepseek-v3", DEEPSEEK_V3), ("gpt-oss-120b", GPT_OSS_120B), ("qwen3-235b-a22b", QWEN3_235B)],
)
def test_config_import_counts_the_routed_experts(name: str, num_experts: int) -> None:
    imported = import_config(FIXTURES / name / "config.json")
    assert imported.spec.num_expert_parameters == num_experts
    assert any(f"{num_experts:,} in the routed experts" in n for n in imported.notes)


def test_dense_config_has_no_expert_parameters() -> None:
    spec = import_config(FIXTURES / "llama-3.2-1b" / "config.json").spec
    assert spec.num_expert_parameters is None


def test_every_bundled_moe_spec_states_its_experts_from_the_config() -> None:
    checked = 0
    for path in sorted(specs_dir().glob("*.yaml")):
        config = FIXTURES / path.stem / "config.json"
        if not config.is_file():
            continue
        spec = load_model(path)
        experts = parameters_from_config(json.loads(config.read_text())).experts
        assert spec.num_expert_parameters == (experts or None), spec.name
        if experts:
            assert experts < (spec.num_parameters or 0)
            assert "num_expert_parameters is the routed experts' Linear weights" in (
                spec.source or ""
            ), spec.name
            checked += 1
    assert checked >= 45


_TINY_MOE = {
    "model_type": "qwen3_moe",
    "num_hidden_layers": 1,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "hidden_size": 64,
    "intermediate_size": 128,
    "moe_intermediate_size": 32,
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "vocab_size": 100,
    "torch_dtype": "bfloat16",
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
}


def _header_only(path: Path, tensors: dict[str, list[int]]) -> None:
    """A safetensors header of bf16 tensors; the data is absent, as only headers are read."""
    header, offset = {}, 0
    for name, shape in tensors.items():
        size = 2 * math.prod(shape)
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)


def _moe_folder(tmp_path: Path, layer: dict[str, list[int]]) -> Path:
    folder = tmp_path / "Tiny-MoE"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(_TINY_MOE))
    tensors = {"model.embed_tokens.weight": [100, 64], "lm_head.weight": [100, 64]}
    _header_only(folder / "model.safetensors", {**tensors, **layer})
    return folder


def test_safetensors_names_give_the_routed_experts(tmp_path: Path) -> None:
    # 4 experts x (gate, up, down) x 64 x 32 = 24,576 routed; the shared expert and the router
    # are not among them
    routed = {
        f"model.layers.0.mlp.experts.{e}.{p}_proj.weight": [32, 64]
        for e in range(4)
        for p in ("gate", "up", "down")
    }
    other = {"model.layers.0.mlp.shared_experts.up_proj.weight": [32, 64]}
    other["model.layers.0.mlp.gate.weight"] = [4, 64]
    imported = import_config(_moe_folder(tmp_path, {**routed, **other}))
    assert imported.spec.num_expert_parameters == 4 * 3 * 64 * 32 == 24_576
    assert imported.spec.num_parameters == 2 * 100 * 64 + 24_576 + 32 * 64 + 4 * 64


def test_mxfp4_expert_blocks_count_as_experts() -> None:
    # gpt-oss: the experts' blocks hold two values a byte, their biases are experts too
    headers = {
        "model.layers.0.mlp.experts.gate_up_proj_blocks": {"dtype": "U8", "shape": [4, 8, 90, 16]},
        "model.layers.0.mlp.experts.gate_up_proj_scales": {"dtype": "U8", "shape": [4, 8, 90]},
        "model.layers.0.mlp.experts.gate_up_proj_bias": {"dtype": "BF16", "shape": [4, 8]},
        "model.layers.0.mlp.router.weight": {"dtype": "BF16", "shape": [4, 64]},
    }
    count = count_parameters(headers, {"quant_method": "mxfp4"})
    assert count.num_expert_parameters == 4 * 8 * 90 * 16 * 2 + 4 * 8 == 92_192


def test_unnamed_experts_leave_the_key_unset_and_say_so(tmp_path: Path) -> None:
    # Granite-style fused expert tensors carry no ``.experts.`` in their names
    fused = {
        "model.layers.0.block_sparse_moe.input_linear.weight": [4, 64, 64],
        "model.layers.0.block_sparse_moe.output_linear.weight": [4, 64, 32],
    }
    imported = import_config(_moe_folder(tmp_path, fused))
    assert imported.spec.num_expert_parameters is None
    # the config's shapes count 4 x 3 x 64 x 32 = 24,576
    unset = [n for n in imported.notes if n.startswith("num_expert_parameters not set")]
    assert len(unset) == 1
    assert "the config's shapes count 24,576" in unset[0]
