"""kvplan tiers: each KV-cache tier sized by its engine's rule, worked by hand here, the host
memory it takes refused past the node's, and reload against recompute over each link."""

from __future__ import annotations

import importlib.util
import json
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kvplan
from kvplan.answers.tiers import reload_vs_recompute, tier_capacity
from kvplan.cli import app
from kvplan.engines import sglang
from kvplan.errors import UnitError

runner = CliRunner()
GiB = 2**30
GB = 10**9
MiB = 2**20
#: Llama 3.1 8B in bf16: 2 (K, V) x 32 layers x 8 KV heads x 128 dims x 2 B
LLAMA_TOKEN = 2 * 32 * 8 * 128 * 2


def _tier(capacity: kvplan.TierCapacity, name: str) -> kvplan.answers.tiers.Tier:
    return next(t for t in capacity.tiers if t.name == name)


# --- the systems' links ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("system", "host_memory", "host_link"),
    [
        ("hgx-h100", 2 * 10**12, 64 * GB),  # DGX H100: 2 TB; PCIe Gen5 x16 128 GB/s both ways
        ("hgx-b200", 2 * 10**12, 64 * GB),
        ("gb200-nvl72", 2 * 480 * GB, 450 * GB),  # 2 Grace x 480 GB; C2C 900 GB/s both ways
        ("l40s-server", 1536 * GiB, 32 * GB),  # g6e.48xlarge 1,536 GiB; PCIe Gen4 x16
        ("l4-server", 768 * GiB, 32 * GB),  # g6.48xlarge 768 GiB
    ],
)
def test_system_links(system: str, host_memory: int, host_link: int) -> None:
    s = kvplan.find_system(system)
    assert (s.host_memory_bytes, s.host_link_bytes_per_s) == (host_memory, host_link)
    assert s.disk_bytes_per_s > 0


def test_every_system_cites_its_tier_links() -> None:
    for s in kvplan.list_systems():
        assert all(f"{key}: " in s.source for key in ("host_memory", "host_link", "disk")), s.name


def test_a_link_figure_without_its_source_is_refused(tmp_path: Path) -> None:
    from kvplan.hardware.systems import load_systems

    (tmp_path / "x.yaml").write_text(
        "systems:\n  - name: x\n    display_name: X\n    gpu: h100\n    gpus_per_node: 8\n"
        "    scale_up_gpus: 8\n    scale_up_bytes_per_s: 1\n    scale_out_bytes_per_s: 1\n"
        "    rents_by_node: true\n    host_link_bytes_per_s: 64000000000\n"
        "    sources: {gpus: a, scale_up: b, scale_out: c}\n"
    )
    with pytest.raises(kvplan.SpecError, match="no source for host_link_bytes_per_s"):
        load_systems(tmp_path)


# --- tier capacity -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tp", "rank_token_bytes"),
    [
        (1, LLAMA_TOKEN),  # 131,072 B
        (2, 2 * 32 * 4 * 128 * 2),  # 4 KV heads a rank: 65,536 B
        (8, 2 * 32 * 1 * 128 * 2),  # 1 KV head a rank: 16,384 B
    ],
)
def test_vllm_native_offload(tp: int, rank_token_bytes: int) -> None:
    c = tier_capacity("llama-3.1-8b", "h100", kv_offloading_size=10, tensor_parallel_size=tp)
    assert (c.token_bytes, c.rank_token_bytes) == (LLAMA_TOKEN, rank_token_bytes)
    cpu = _tier(c, "cpu")
    # the size is summed over the ranks: 10 GiB / (16 tokens x one token on every rank)
    blocks = 10 * GiB // (16 * rank_token_bytes * tp)
    assert (cpu.unit_name, cpu.unit_tokens, cpu.num_units) == ("block", 16, blocks)
    assert cpu.tokens == 81_920  # 10 GiB / 128 KiB a token, whatever the TP
    assert cpu.num_prefixes == 81_920 // 4096  # 20 prefixes of 4,096
    assert c.host_bytes == 10 * GiB
    assert cpu.link_bytes_per_s == 64 * GB


def test_vllm_lmcache_backend_in_chunks_of_256() -> None:
    c = tier_capacity(
        "llama-3.1-8b", "h100", kv_offloading_size="10", kv_offloading_backend="lmcache"
    )
    cpu = _tier(c, "cpu")
    assert (cpu.unit_name, cpu.num_units) == ("chunk", 10 * GiB // (256 * LLAMA_TOKEN))  # 320
    assert cpu.tokens == 81_920


def test_vllm_gpu_tier_is_the_engine_pool() -> None:
    from kvplan.engines import vllm

    c = tier_capacity("llama-3.1-8b", "h100")
    pool = vllm.profile("llama-3.1-8b", "h100", vllm.config(131072))
    gpu = _tier(c, "gpu")
    assert (gpu.num_units, gpu.unit_tokens) == (pool.num_gpu_blocks, 16)
    assert [t.name for t in c.tiers] == ["gpu"]  # no offloading asked for: no host tier
    assert c.host_bytes == 0


def test_lmcache_cpu_and_disk() -> None:
    c = tier_capacity("llama-3.1-8b", "h100", engine="lmcache", lmcache_max_local_disk_size=100)
    cpu, disk = _tier(c, "cpu"), _tier(c, "disk")
    # default LMCACHE_MAX_LOCAL_CPU_SIZE 5.0 GiB: 5 x 2^30 / (256 x 131,072) = 160 chunks
    assert (cpu.num_units, cpu.tokens) == (160, 40_960)
    assert (disk.num_units, disk.tokens) == (100 * GiB // (256 * LLAMA_TOKEN), 819_200)
    assert c.host_bytes == 5 * GiB  # the disk takes no host memory
    assert disk.link_bytes_per_s == 8 * 7 * GB  # 8 NVMe drives at 7 GB/s


def test_lmcache_per_rank_sizes_add_up_on_the_node() -> None:
    c = tier_capacity("llama-3.1-8b", "h100", engine="lmcache", tensor_parallel_size=4)
    assert c.host_bytes == 4 * 5 * GiB  # 5 GiB on each of 4 ranks


def test_sglang_hicache_ratio_and_size() -> None:
    device = sglang.kv_cache("llama-3.1-8b", "h100").kv_cache_tokens or 0
    c = tier_capacity("llama-3.1-8b", "h100", engine="sglang")
    assert _tier(c, "gpu").tokens == device
    # int(device x 2.0) tokens, then size // page + 1 pages of 1 token
    assert _tier(c, "cpu").tokens == 2 * device + 1
    sized = tier_capacity("llama-3.1-8b", "h100", engine="sglang", hicache_size=100, page_size=64)
    # 100 GB // 131,072 B = 762,939 tokens; // 64 = 11,920 pages, + 1
    assert _tier(sized, "cpu").num_units == 11_921
    assert _tier(sized, "cpu").tokens == 11_921 * 64


def test_llamacpp_no_kv_offload_holds_the_whole_cache() -> None:
    c = tier_capacity("llama-3.1-8b", "h100", engine="llamacpp", max_model_len=131072)
    cpu = _tier(c, "cpu")
    assert [t.name for t in c.tiers] == ["cpu"]
    assert cpu.tokens == 131_072
    assert c.host_bytes == 131_072 * LLAMA_TOKEN  # 16 GiB in f16
    assert c.host_bytes == 16 * GiB


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        # 2 TB // 2^30 = 1,862 GiB fit on an HGX H100
        ({"kv_offloading_size": 3000}, "--kv-offloading-size 1862 or less fits"),
        (
            {"engine": "lmcache", "lmcache_max_local_cpu_size": 600, "tensor_parallel_size": 8},
            "LMCACHE_MAX_LOCAL_CPU_SIZE=232 or less fits",  # 2 TB / 8 ranks / 2^30
        ),
        (
            {"engine": "sglang", "hicache_size": 1000, "host_memory_bytes": "100GiB"},
            "after SGLang's 10.00 GiB reserve",
        ),
        (
            {"engine": "llamacpp", "max_model_len": 131072, "host_memory_bytes": "8GiB"},
            "-c 65536 or less fits",  # 8 GiB / 128 KiB a cell
        ),
    ],
)
def test_a_tier_larger_than_the_node_is_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(UnitError, match=message):
        tier_capacity("llama-3.1-8b", "h100", **kwargs)  # type: ignore[arg-type]


def test_the_largest_setting_said_to_fit_fits() -> None:
    tier_capacity("llama-3.1-8b", "h100", kv_offloading_size=1862)
    with pytest.raises(UnitError):
        tier_capacity("llama-3.1-8b", "h100", kv_offloading_size=1863)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"engine": "trtllm"}, "engine: 'trtllm' is not one of vllm, sglang, lmcache, llamacpp"),
        ({"kv_offloading_backend": "disk"}, "is not one of native, lmcache"),
        ({"engine": "llamacpp", "tensor_parallel_size": 2}, "llama.cpp keeps one host cache"),
        ({"gpu": "a100-80gb"}, "no host memory known for a100-80gb-x8"),
        ({"spec": "gemma-3-27b"}, "sliding_attention layers are offloaded per KV cache group"),
    ],
)
def test_refusals_name_the_setting(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"spec": "llama-3.1-8b", "gpu": "h100", **kwargs}
    with pytest.raises(UnitError, match=message):
        tier_capacity(**args)  # type: ignore[arg-type]


def test_host_memory_given_replaces_the_systems() -> None:
    c = tier_capacity("llama-3.1-8b", "a100-80gb", host_memory_bytes="512GiB")
    assert c.host_memory_bytes == 512 * GiB


# --- reload against recompute --------------------------------------------------------------------


def test_a_4096_token_prefix_reloads_in_bytes_over_the_link() -> None:
    r = reload_vs_recompute("llama-3.1-8b", "h100", prefix_tokens=[4096], max_tokens=8192)
    row = next(x for x in r.rows if x.prefix_tokens == 4096)
    assert row.rank_bytes == 512 * MiB  # 4,096 x 131,072 B
    host, disk, remote = row.reload_seconds
    assert host == Fraction(512 * MiB, 64 * GB)  # 8.39 ms over PCIe Gen5
    assert disk == Fraction(512 * MiB, 56 * GB // 8)  # the node's NVMe over its 8 GPUs
    assert remote == Fraction(512 * MiB, 50 * GB)  # one 400 Gb/s NIC per GPU


def test_recompute_is_the_prefills_flops_at_the_peak_and_efficiency() -> None:
    r = reload_vs_recompute("llama-3.1-8b", "h100", prefix_tokens=[4096], max_tokens=4096)
    n = 4096
    params = 8_030_261_248  # Llama 3.1 8B
    # 2 FLOPs a parameter a token, and per layer 2 x 32 query heads x (128 + 128) dims over
    # the causal pairs n(n+1)/2
    flops = 2 * params * n + 32 * 2 * 32 * 256 * n * (n + 1) // 2
    expected = Fraction(flops, 989_500_000_000_000) / Fraction(3, 5)  # H100 bf16 at 0.6
    assert r.rows[-1].recompute_seconds == expected


def test_break_even_shortest_length_and_every_longer_one() -> None:
    r = reload_vs_recompute("qwen3-0.6b", "h100", max_tokens=4096)
    found = {b.tier: b for b in r.break_even}
    assert found["cpu"].verdict == "always"
    assert found["disk"].verdict == "never"  # 7 GB/s a GPU: 114,688 B a token in 16 us
    remote = found["remote"]
    assert remote.verdict == "from"
    assert remote.prefix_tokens is not None
    n = remote.prefix_tokens
    slower = reload_vs_recompute("qwen3-0.6b", "h100", prefix_tokens=[n - 1, n, 2 * n])
    rows = {row.prefix_tokens: row for row in slower.rows}
    for tokens, faster in ((n - 1, False), (n, True), (2 * n, True)):
        reload = rows[tokens].reload_seconds[2]
        assert reload is not None
        assert (reload < rows[tokens].recompute_seconds) is faster, tokens


def test_an_unknown_link_is_said_so() -> None:
    from kvplan.hardware.systems import custom_system

    bare = custom_system(kvplan.find_gpu("a100-80gb"), 8)
    r = reload_vs_recompute("llama-3.1-8b", "a100-80gb", system=bare, max_tokens=1024)
    assert {b.verdict for b in r.break_even} == {"unknown"}
    assert all(s is None for row in r.rows for s in row.reload_seconds)


# --- the command ---------------------------------------------------------------------------------


def test_cli_json() -> None:
    args = ["tiers", "-m", "llama-3.1-8b", "--gpu", "h100", "--kv-offloading-size", "10"]
    result = runner.invoke(app, [*args, "-c", "8K", "-f", "json"])
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema_version"] == 1
    cpu = next(t for t in doc["tiers"] if t["tier"] == "cpu")
    assert (cpu["num_units"], cpu["tokens"], cpu["host_bytes"]) == (5120, 81_920, 10 * GiB)
    assert [row["prefix_tokens"] for row in doc["reload"]["rows"]] == [
        256,
        512,
        1024,
        2048,
        4096,
        8192,
    ]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["-e", "tgi"], "'--engine' / '-e': 'tgi' is not one of 'vllm', 'sglang', 'lmcache'"),
        (["--kv-offloading-size", "ten"], "--kv-offloading-size: expected a decimal number"),
        (["--host-memory", "512G"], "--host-memory: ambiguous"),
        (["--prefix-tokens", "0"], "--prefix-tokens: must be at least 1 token"),
        (["--kv-offloading-size", "5000"], "--kv-offloading-size 1862 or less fits"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(extra: list[str], message: str) -> None:
    result = runner.invoke(app, ["tiers", "-m", "llama-3.1-8b", "--gpu", "h100", *extra])
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1


def test_cli_plot_keeps_an_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "tiers.png"
    target.write_bytes(b"mine")
    args = ["tiers", "-m", "qwen3-0.6b", "--gpu", "h100", "-c", "4K", "--plot", str(target)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert "--force" in result.stderr
    assert target.read_bytes() == b"mine"
    if importlib.util.find_spec("matplotlib") is None:
        return
    forced = runner.invoke(app, [*args, "--force"])
    assert forced.exit_code == 0, forced.stderr
    assert target.read_bytes().startswith(b"\x89PNG")
