"""Names users type -> catalog entries and weight formats (kvplan.catalog.names via
load_model)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.catalog.lookup import list_models, load_model
from kvplan.cli import app
from kvplan.errors import ModelNotFoundError, NameRefusedError
from kvplan.model.weights import QUANTIZATIONS, model_weights

runner = CliRunner()

# typed name -> (catalog name, weight_dtype the name sets; None: the spec's own weights)
RESOLVED = [
    # the names of the issue
    ("google/gemma-2-27b-it", "gemma-2-27b", None),
    ("deepseek-ai/DeepSeek-V3-0324", "deepseek-v3", "fp8_e4m3"),  # the spec's own fp8
    ("Qwen/Qwen3-235B-A22B-FP8", "qwen3-235b-a22b", "fp8_e4m3"),
    ("Qwen/Qwen3-32B-AWQ", "qwen3-32b", "awq"),
    ("llama3.1:8b", "llama-3.1-8b", "q4_0"),
    # organisations: re-uploaders and the catalog's makers
    ("unsloth/Llama-3.3-70B-Instruct-bnb-4bit", "llama-3.3-70b", "int4"),
    ("unsloth/gemma-3-27b-it-unsloth-bnb-4bit", "gemma-3-27b", "int4"),
    ("unsloth/DeepSeek-V3-0324-GGUF", "deepseek-v3", "fp8_e4m3"),
    ("unsloth/DeepSeek-R1-GGUF", "deepseek-r1", "fp8_e4m3"),
    ("unsloth/gpt-oss-20b-GGUF", "gpt-oss-20b", "mxfp4"),
    ("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic", "llama-3.1-8b", "fp8_e4m3"),
    ("RedHatAI/Llama-3.1-8B-Instruct-W8A8", "llama-3.1-8b", "int8"),
    ("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", "llama-3.3-70b", "fp8_e4m3"),
    ("RedHatAI/Llama-3.3-70B-Instruct-quantized.w4a16", "llama-3.3-70b", "int4"),
    ("RedHatAI/Mistral-Small-24B-Instruct-2501-FP8-dynamic", "mistral-small-24b-2501", "fp8_e4m3"),
    ("neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w4a16", "llama-3.1-70b", "int4"),
    ("neuralmagic/Meta-Llama-3.1-8B-Instruct-quantized.w8a8", "llama-3.1-8b", "int8"),
    ("nm-testing/Llama-3.2-1B-Instruct-FP8", "llama-3.2-1b", "fp8_e4m3"),
    ("TheBloke/Llama-2-7B-Chat-AWQ", "llama-2-7b", "awq"),
    ("TheBloke/Llama-2-13B-chat-GPTQ", "llama-2-13b", "gptq"),
    ("TheBloke/Mixtral-8x7B-Instruct-v0.1-AWQ", "mixtral-8x7b", "awq"),
    ("TheBloke/CodeLlama-34B-Instruct-AWQ", "codellama-34b", "awq"),
    ("bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "llama-3.1-8b", None),
    ("hf.co/bartowski/Meta-Llama-3.1-8B-Instruct-GGUF:Q4_K_M", "llama-3.1-8b", "q4_0"),
    ("hf.co/bartowski/Meta-Llama-3.1-8B-Instruct-GGUF:Q8_0", "llama-3.1-8b", "q8_0"),
    ("lmstudio-community/Qwen3-30B-A3B-GGUF", "qwen3-30b-a3b", None),
    ("lmstudio-community/gemma-3-12b-it-GGUF", "gemma-3-12b", None),
    ("mlx-community/Llama-3.2-3B-Instruct-4bit", "llama-3.2-3b", "nvfp4"),  # 36 B / 64 = 9 / 16
    ("mlx-community/Qwen3-8B-8bit", "qwen3-8b", "q8_0"),  # 68 B / 64 = 34 / 32
    ("mlx-community/Qwen3-4B-4bit", "qwen3-4b", "nvfp4"),
    ("Qwen/Qwen3-8B-FP8", "qwen3-8b", "fp8_e4m3"),
    ("Qwen/Qwen3-14B-AWQ", "qwen3-14b", "awq"),
    ("Qwen/Qwen3-30B-A3B-GPTQ-Int4", "qwen3-30b-a3b", "gptq"),
    ("Qwen/Qwen2.5-72B-Instruct-GPTQ-Int4", "qwen2.5-72b", "gptq"),
    ("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int8", "qwen2.5-7b", "int8"),
    ("Qwen/Qwen2.5-14B-Instruct-AWQ", "qwen2.5-14b", "awq"),
    # two suffixes of one width: the outermost is what the files have
    ("hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4", "llama-3.1-8b", "int4"),
    ("Qwen/Qwen2.5-32B-Instruct-GGUF", "qwen2.5-32b", None),
    ("Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8", "qwen3-coder-480b-a35b", "fp8_e4m3"),
    ("meta-llama/Llama-3.1-8B-Instruct-FP8", "llama-3.1-8b", "fp8_e4m3"),
    ("nvidia/Llama-3.3-70B-Instruct-FP4", "llama-3.3-70b", "nvfp4"),
    ("nvidia/DeepSeek-R1-0528-FP4", "deepseek-r1", "nvfp4"),
    ("openai/gpt-oss-120b-MXFP4", "gpt-oss-120b", "mxfp4"),
    ("deepseek-ai/DeepSeek-R1-0528", "deepseek-r1", "fp8_e4m3"),
    ("google/gemma-2-9b-it", "gemma-2-9b", None),
    ("google/gemma-2-2b-it-GGUF", "gemma-2-2b", None),
    ("mistralai/Mistral-7B-Instruct-v0.3-AWQ", "mistral-7b-v0.3", "awq"),
    ("microsoft/phi-4-gguf", "phi-4", None),
    # spaces, version words and the maker's prefix (what GGUF general.name holds)
    ("Meta Llama 3.1 8B Instruct", "llama-3.1-8b", None),
    ("Qwen3 235B A22B", "qwen3-235b-a22b", None),
    ("Qwen3-235B-A22B-FP8", "qwen3-235b-a22b", "fp8_e4m3"),
    ("Meta-Llama-3.1-8B-Instruct-Q4_K_M", "llama-3.1-8b", "q4_0"),
    ("Llama-3.2-3B-Instruct-Q8_0", "llama-3.2-3b", "q8_0"),
    # Ollama tags
    ("llama3.1:70b", "llama-3.1-70b", "q4_0"),
    ("llama3.1:70b-instruct-q4_K_M", "llama-3.1-70b", "q4_0"),
    ("llama3.1:8b-instruct-fp16", "llama-3.1-8b", None),
    ("llama3.1:8b-text-q8_0", "llama-3.1-8b", "q8_0"),
    ("llama3.1:405b", "llama-3.1-405b", "q4_0"),
    ("llama3.2:3b", "llama-3.2-3b", "q4_0"),
    ("llama3.3:70b", "llama-3.3-70b", "q4_0"),
    ("llama3:8b", "llama-3-8b", "q4_0"),
    ("llama2:13b", "llama-2-13b", "q4_0"),
    ("qwen3:32b-q4_K_M", "qwen3-32b", "q4_0"),
    ("qwen3:0.6b-q8_0", "qwen3-0.6b", "q8_0"),
    ("qwen3:30b-a3b-q8_0", "qwen3-30b-a3b", "q8_0"),
    ("qwen2.5:7b-instruct-q5_K_M", "qwen2.5-7b", "q5_0"),
    ("gemma3:27b-it-fp16", "gemma-3-27b", None),
    ("gemma3:27b-it-qat", "gemma-3-27b", "q4_0"),
    ("gemma2:9b", "gemma-2-9b", "q4_0"),
    ("deepseek-r1:671b", "deepseek-r1", "q4_0"),
    ("deepseek-v3:671b", "deepseek-v3", "q4_0"),
    ("deepseek-v2:16b", "deepseek-v2-lite", "q4_0"),
    ("gpt-oss:20b", "gpt-oss-20b", "mxfp4"),
    ("gpt-oss:120b", "gpt-oss-120b", "mxfp4"),
    ("mixtral:8x7b", "mixtral-8x7b", "q4_0"),
    ("mistral:7b", "mistral-7b-v0.3", "q4_0"),
    ("phi4:14b", "phi-4", "q4_0"),
    ("codellama:34b", "codellama-34b", "q4_0"),
    ("qwen3-coder:480b-q8_0", "qwen3-coder-480b-a35b", "q8_0"),
]


@pytest.mark.parametrize(("typed", "name", "weight_dtype"), RESOLVED)
def test_typed_name_resolves(typed: str, name: str, weight_dtype: str | None) -> None:
    spec = load_model(typed)
    assert spec.name == name
    assert spec.weight_dtype == weight_dtype
    assert spec.resolved_from == typed
    assert spec.provenance  # says how it was read
    # the cache geometry is the catalog entry's, untouched
    catalog = load_model(name)
    assert spec.layers == catalog.layers
    assert spec.max_position_embeddings == catalog.max_position_embeddings


def test_catalog_names_carry_no_provenance() -> None:
    spec = load_model("Qwen/Qwen3-32B")
    assert spec.resolved_from is None
    assert spec.provenance == ()


def test_llama_4_scout_instruct_is_its_own_entry() -> None:
    """The Instruct release states max_position_embeddings 10485760 (llama3 rope factor 16),
    the base 262144: same cache per token, 2 x 48 x 8 x 128 x 2 B = 196,608 B."""
    for typed in (
        "meta-llama/Llama-4-Scout-17B-16E-Instruct",
        "unsloth/Llama-4-Scout-17B-16E-Instruct",
    ):
        spec = load_model(typed)
        assert spec.name == "llama-4-scout-instruct"
        assert spec.max_position_embeddings == 10_485_760
    assert load_model("llama-4-scout").max_position_embeddings == 262_144


REFUSED = [
    # trained length differs (config.json of each release)
    ("meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8", "1048576", "llama-4-maverick"),
    ("Qwen/Qwen3-8B-Base", "32,768", "qwen3-8b"),
    ("THUDM/glm-4-9b-chat", "131072", "glm-4-9b"),
    # unchecked variants and unknown organisations fail closed
    ("deepseek-ai/DeepSeek-V3-1226", "not checked", "deepseek-v3"),
    ("google/gemma-3-27b-it-base", "not checked", "gemma-3-27b"),
    ("someone/Llama-3.1-8B", "fine-tune", "llama-3.1-8b"),
    # Ollama: distills and sizes the catalog lacks, quantizations kvplan cannot size
    ("deepseek-r1:8b", "deepseek-r1:8b", "deepseek-r1"),
    ("llama3.1:8b-q2_K", "q2_k", None),
    ("unsloth/DeepSeek-R1-GGUF:UD-IQ1_S", "iq1", None),
    # two weight formats of different widths contradict each other: neither is read
    ("qwen3:8b-q4_K_M-q8_0-fp16", "q8_0 and q4_k_m name weights of 8 and 4 bits", None),
    ("Qwen/Qwen3-8B-FP8-GGUF:Q4_K_M", "fp8 and q4_k_m name weights of 8 and 4 bits", None),
    ("Qwen3-8B-bf16-AWQ", "bf16 and awq name weights of 16 and 4 bits", None),
]


# Releases trained for another length than the original, each with its own catalog entry
# (config.json of each release: max_position_embeddings).
OWN_ENTRY = [
    ("Qwen/Qwen3-235B-A22B-Instruct-2507", "qwen3-235b-a22b-2507", 262_144),
    ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "qwen3-235b-a22b-2507", 262_144),
    ("Qwen/Qwen3-30B-A3B-Thinking-2507", "qwen3-30b-a3b-2507", 262_144),
    ("Qwen/Qwen3-4B-Instruct-2507", "qwen3-4b-2507", 262_144),
    ("qwen3:30b-a3b-instruct-2507-q4_K_M", "qwen3-30b-a3b-2507", 262_144),
    ("moonshotai/Kimi-K2-Instruct-0905", "kimi-k2-0905", 262_144),
    ("unsloth/Kimi-K2-Instruct-0905-GGUF", "kimi-k2-0905", 262_144),
    ("mistralai/Mistral-Nemo-Instruct-2407", "mistral-nemo-instruct-2407", 1_024_000),
]


@pytest.mark.parametrize(("typed", "name", "max_positions"), OWN_ENTRY)
def test_release_with_its_own_entry_resolves_to_it(
    typed: str, name: str, max_positions: int
) -> None:
    spec = load_model(typed)
    assert (spec.name, spec.max_position_embeddings) == (name, max_positions)


@pytest.mark.parametrize(("typed", "reason", "nearest"), REFUSED)
def test_variant_is_refused(typed: str, reason: str, nearest: str | None) -> None:
    with pytest.raises(NameRefusedError) as info:
        load_model(typed)
    message = str(info.value)
    assert "\n" not in message
    assert reason in message
    if nearest is not None:
        assert nearest in info.value.suggestions


def test_unknown_name_suggests_nearest() -> None:
    with pytest.raises(ModelNotFoundError) as info:
        load_model("mistralai/Mixtral-8x9B-v0.1")
    assert "mixtral-8x7b" in info.value.suggestions


@pytest.mark.parametrize(
    "typed",
    [
        "Qwen/Qwen3-235B-A22B-Instruct-2510",
        "nosuch-model-9b",
        "llama3.1:8b-q2_K",
        "qwen3:8b-q4_K_M-q8_0-fp16",
    ],
)
def test_cli_refusal_is_one_line_exit_2(typed: str) -> None:
    result = runner.invoke(app, ["calc", typed, "--context", "8k"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line]
    assert len(lines) == 1
    assert lines[0].startswith("kvplan: error:")


def test_fp8_reupload_sizes_fp8_weights() -> None:
    # Qwen3-32B: 32,762,123,264 parameters; embeddings and untied head 151,936 x 5,120 =
    # 777,912,320 each, so 32,762,123,264 - 2 x 777,912,320 = 31,206,298,624 in fp8
    # 128x128 blocks (16,388 B per 16,384 weights) and 2 x 777,912,320 x 2 B in bf16.
    spec = load_model("Qwen/Qwen3-32B-FP8")
    assert spec.num_quantized_parameters is None
    weights = model_weights(spec)
    assert weights.embedding_bytes == weights.lm_head_bytes == 1_555_824_640
    fp8_bytes = weights.layers_bytes
    assert 31_206_298_624 < fp8_bytes < 31_206_298_624 * 16_388 // 16_384 + 16_388
    awq = model_weights(load_model("Qwen/Qwen3-32B-AWQ"))
    # AWQ: 133 B per 256 weights
    assert awq.layers_bytes == QUANTIZATIONS["awq"].row_bytes(31_206_298_624)
    assert awq.layers_bytes == -(-31_206_298_624 * 133 // 256)


def test_calc_table_says_how_the_name_was_read() -> None:
    result = runner.invoke(app, ["calc", "Qwen/Qwen3-32B-AWQ", "--context", "8k"])
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert "Qwen/Qwen3-32B-AWQ" in first
    assert "awq" in first.lower()


@pytest.mark.parametrize("command", ["calc", "plan"])
def test_json_carries_resolved_from(command: str) -> None:
    args = [command, "Qwen/Qwen3-235B-A22B-FP8", "--format", "json"]
    args += ["--context", "8k"] if command == "calc" else ["--gpu", "h100", "-tp", "4"]
    result = runner.invoke(app, args)
    assert result.exit_code in (0, 1), result.output
    doc = json.loads(result.stdout)
    assert doc["resolved_from"] == "Qwen/Qwen3-235B-A22B-FP8"
    assert any("fp8" in line for line in doc["provenance"])
    # qwen3-235b-a22b: 2 x 94 layers x 4 kv_heads x 128 head_dim x 2 B = 192,512 B per token
    if command == "calc":
        assert doc["bytes_per_token"] == 2 * 94 * 4 * 128 * 2


def test_json_of_a_catalog_name_has_null_resolved_from() -> None:
    result = runner.invoke(app, ["calc", "qwen3-8b", "--context", "8k", "--format", "json"])
    doc = json.loads(result.stdout)
    assert doc["resolved_from"] is None
    assert doc["provenance"] == []


# Ollama tags that are also a bundled spec's alias were found by the alias lookup before the
# Ollama rules and sized in the spec's bf16; every tag without a quantization is Ollama's
# default build, q4_K_M, whatever the family.
OLLAMA_ALIASES = [
    alias for spec in list_models() for alias in spec.aliases if ":" in alias and "/" not in alias
]


def test_bundled_specs_have_ollama_aliases() -> None:
    assert {"qwen3:8b", "qwen3:32b", "gemma3:27b"} <= set(OLLAMA_ALIASES)


@pytest.mark.parametrize("tag", OLLAMA_ALIASES)
def test_every_ollama_alias_is_ollama_default_build(tag: str) -> None:
    spec = load_model(tag)
    assert tag in spec.aliases  # still the spec that lists it
    assert spec.weight_dtype == "q4_0"  # q4_K_M sized as q4_0, 4.5 bits a weight
    assert spec.resolved_from == tag
    assert any("Ollama's default build, q4_K_M" in line for line in spec.provenance)
    assert spec.provenance[-1] == f"read as {spec.name}"


@pytest.mark.parametrize(
    ("tag", "weights_bytes"),
    [
        # qwen3-8b: 8,190,735,360 params - 2 x 151,936 x 4,096 (untied embeddings and head)
        # = 6,946,075,648 in q4_0 at 18 B per 32 = 3,907,167,552, + 2 x 622,329,856 x 2 B
        # = 2,489,319,424 in bf16 -> 6,396,486,976 (bf16 throughout: 16,381,470,720)
        ("qwen3:8b", 3_907_167_552 + 2_489_319_424),
        # qwen3-32b: 32,762,123,264 - 2 x 151,936 x 5,120 = 31,206,298,624 x 18 / 32
        # = 17,553,542,976, + 2 x 777,912,320 x 2 B = 3,111,649,280
        ("qwen3:32b", 17_553_542_976 + 3_111_649_280),
        # llama-3.1-8b (read by the family rule, not an alias): 8,030,261,248 - 2 x 128,256 x
        # 4,096 = 6,979,588,096 x 18 / 32 = 3,926,018,304, + 2 x 525,336,576 x 2 B
        ("llama3.1:8b", 3_926_018_304 + 2_101_346_304),
    ],
)
def test_plan_sizes_ollama_tag_in_default_build(tag: str, weights_bytes: int) -> None:
    result = runner.invoke(app, ["plan", tag, "--gpu", "h100", "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    doc = json.loads(result.stdout)
    assert doc["weights_bytes"] == weights_bytes
    assert doc["resolved_from"] == tag
    assert doc["provenance"][-1].startswith("read as ")


@pytest.mark.parametrize(
    ("tag", "name"),
    [("qwen3:32b", "qwen3-32b"), ("gemma3:27b", "gemma-3-27b"), ("llama3.1:8b", "llama-3.1-8b")],
)
def test_calc_table_reads_ollama_tag(tag: str, name: str) -> None:
    result = runner.invoke(app, ["calc", tag, "--context", "8k"])
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert f"model '{tag}'" in first
    assert "q4_K_M" in first
    assert first.endswith(f"read as {name}")


def test_explicit_quantization_in_an_alias_form_tag_wins() -> None:
    assert load_model("qwen3:8b-q8_0").weight_dtype == "q8_0"
    assert load_model("qwen3:8b-fp16").weight_dtype is None
    # the catalog name itself keeps the spec's own weights
    assert load_model("qwen3-8b").weight_dtype is None
