from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kvplan.errors import SpecError
from kvplan.model.layers import (
    ChunkedLocalAttention,
    FullAttention,
    MLALatent,
    NoCache,
    RecurrentState,
    SlidingWindowAttention,
)
from kvplan.model.spec import load_spec, parse_spec

BASE = {
    "name": "m",
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "torch_dtype": "bfloat16",
}


def spec(**overrides: object):  # type: ignore[no-untyped-def]
    return parse_spec({**BASE, **overrides})


def test_minimal_spec(tiny_spec: Path) -> None:
    s = load_spec(tiny_spec)
    assert s.name == "tiny"
    assert s.layers == (FullAttention(2, 3, 3),)


def test_head_dim_from_hidden_size_and_kv_heads_default() -> None:
    s = parse_spec(
        {
            "name": "x",
            "num_hidden_layers": 2,
            "num_attention_heads": 32,
            "hidden_size": 4096,
            "torch_dtype": "float16",
        }
    )
    assert s.layers[0] == FullAttention(num_kv_heads=32, head_dim=128, v_head_dim=128)


def test_stated_head_dim_wins_over_hidden_size() -> None:
    # Qwen3-8B: hidden 4096 / 32 heads = 128, but Qwen3-0.6B states 128 with hidden 1024 / 16 = 64
    s = parse_spec({**BASE, "hidden_size": 1024, "num_attention_heads": 16, "head_dim": 128})
    assert s.layers[0] == FullAttention(2, 128, 128)


def test_v_head_dim() -> None:
    assert spec(v_head_dim=8).layers[0] == FullAttention(2, 16, 8)


def test_name_defaults_to_file_stem(write_spec: Callable[[str, str], Path]) -> None:
    path = write_spec(
        "num_hidden_layers: 1\nnum_attention_heads: 1\nhead_dim: 8\ntorch_dtype: bfloat16\n",
        "my-model.yaml",
    )
    assert load_spec(path).name == "my-model"


def test_json_config_subset_is_a_spec(write_spec: Callable[[str, str], Path]) -> None:
    path = write_spec(
        '{"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,'
        ' "hidden_size": 4096, "torch_dtype": "bfloat16", "max_position_embeddings": 131072}',
        "config.json",
    )
    s = load_spec(path)
    assert s.layers[0] == FullAttention(8, 128, 128)


def test_layer_types_pattern_cycles() -> None:
    s = spec(
        num_hidden_layers=7,
        sliding_window=512,
        layer_types_pattern=["sliding_attention", "sliding_attention", "full_attention"],
    )
    kinds = [layer.kind for layer in s.layers]
    assert kinds == ["sliding_attention", "sliding_attention", "full_attention"] * 2 + [
        "sliding_attention"
    ]
    assert {layer.kind: n for layer, n in s.layer_groups} == {
        "sliding_attention": 5,
        "full_attention": 2,
    }


def test_explicit_layer_types() -> None:
    s = spec(
        layer_types=["full_attention", "no_cache", "chunked_attention", "mamba"],
        attention_chunk_size=64,
        mamba_d_state=16,
        mamba_d_conv=4,
        mamba_expand=2,
        hidden_size=128,
    )
    assert isinstance(s.layers[1], NoCache)
    assert s.layers[2] == ChunkedLocalAttention(2, 16, 16, chunk=64)
    assert isinstance(s.layers[3], RecurrentState)


def test_sliding_window_alone_slides_every_layer() -> None:
    s = spec(sliding_window=4096)
    assert all(layer == SlidingWindowAttention(2, 16, 16, window=4096) for layer in s.layers)


def test_qwen2_unused_sliding_window_is_ignored() -> None:
    s = spec(sliding_window=131072, use_sliding_window=False, max_window_layers=2)
    assert all(type(layer) is FullAttention for layer in s.layers)


def test_qwen2_max_window_layers_when_used() -> None:
    s = spec(sliding_window=1024, use_sliding_window=True, max_window_layers=3)
    assert [layer.kind for layer in s.layers] == ["full_attention"] * 3 + ["sliding_attention"]


def test_mla_layers_cache_one_latent() -> None:
    s = spec(kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128)
    assert s.layers == (MLALatent(512, 64),) * 4


def test_mamba1_state_values() -> None:
    # Jamba: d_inner = 2 x 4096 = 8192; conv 8192 x 3, ssm 8192 x 16
    s = spec(
        layer_types_pattern=["mamba"],
        hidden_size=4096,
        mamba_d_state=16,
        mamba_d_conv=4,
        mamba_expand=2,
    )
    layer = s.layers[0]
    assert isinstance(layer, RecurrentState)
    assert (layer.conv_values, layer.ssm_values) == (24576, 131072)
    assert layer.state_bytes == (24576 + 131072) * 4


def test_mamba2_state_values() -> None:
    # Nemotron-H 8B: 128 heads x 64, 8 groups, state 128, kernel 4
    s = spec(
        layer_types_pattern=["mamba"],
        mamba_d_state=128,
        mamba_d_conv=4,
        mamba_n_heads=128,
        mamba_d_head=64,
        mamba_n_groups=8,
    )
    layer = s.layers[0]
    assert isinstance(layer, RecurrentState)
    assert layer.conv_values == (8192 + 2 * 8 * 128) * 3
    assert layer.ssm_values == 128 * 64 * 128


def test_gated_delta_net_state_values_and_state_dtype() -> None:
    # Qwen3-Next: 16 K heads, 32 V heads, dims 128, kernel 4
    s = spec(
        layer_types_pattern=["linear_attention"],
        linear_num_key_heads=16,
        linear_num_value_heads=32,
        linear_key_head_dim=128,
        linear_value_head_dim=128,
        linear_conv_kernel_dim=4,
        state_dtype="bf16",
    )
    layer = s.layers[0]
    assert isinstance(layer, RecurrentState)
    assert layer.conv_values == (2 * 16 * 128 + 32 * 128) * 3
    assert layer.ssm_values == 32 * 128 * 128
    assert layer.state_bytes == (layer.conv_values + layer.ssm_values) * 2


def test_layer_runs_for_display() -> None:
    s = spec(
        num_hidden_layers=5,
        sliding_window=8,
        layer_types_pattern=["sliding_attention", "sliding_attention", "full_attention"],
    )
    assert [(a, b, layer.kind) for a, b, layer in s.layer_runs()] == [
        (0, 1, "sliding_attention"),
        (2, 2, "full_attention"),
        (3, 4, "sliding_attention"),
    ]


def test_spec_is_frozen() -> None:
    s = spec()
    with pytest.raises(AttributeError, match="cannot assign"):  # a frozen dataclass
        s.num_hidden_layers = 3  # type: ignore[misc]


# --- bad input: each a SpecError naming the file, the line and the field -------------------

GOOD = "name: bad\nnum_hidden_layers: 2\nnum_attention_heads: 2\nhead_dim: 4\ntorch_dtype: bf16\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            GOOD + "num_kv_heads: 2\n",
            ":6: num_kv_heads: unknown key; did you mean 'num_key_value_heads'?",
        ),
        (
            GOOD.replace("head_dim: 4", "head_dim: 0"),
            ":4: head_dim: input should be greater than 0",
        ),
        (
            GOOD.replace("num_hidden_layers: 2", "num_hidden_layers: -1"),
            ":2: num_hidden_layers: input should be greater than 0",
        ),
        (
            GOOD.replace("bf16", "fp9"),
            ":5: torch_dtype: unknown model dtype 'fp9'; allowed: float32, float16, bfloat16",
        ),
        (GOOD + "state_dtype: q9\n", ":6: state_dtype: unknown dtype 'q9'; allowed: float32"),
        (
            GOOD + "layer_types: [full_attention]\n",
            ":6: layer_types: has 1 entries but num_hidden_layers is 2",
        ),
        (
            GOOD + "layer_types: [full_attention, slide]\n",
            ":6: layer_types.1: input should be 'full_attention'",
        ),
        (
            GOOD + "layer_types_pattern: [sliding_attention]\n",
            "sliding_window: required by sliding_attention layers",
        ),
        (GOOD + "kv_lora_rank: 512\n", "qk_rope_head_dim: required with kv_lora_rank"),
        (
            GOOD + "layer_types_pattern: [mamba]\n",
            "mamba_d_state, mamba_d_conv: required by mamba layers",
        ),
        (GOOD + "layer_types_pattern: [linear_attention]\n", "linear_num_key_heads"),
        (
            "name: x\nnum_hidden_layers: 1\nnum_attention_heads: 3\nhidden_size: 8\n"
            "torch_dtype: bf16\n",
            "head_dim: required, since hidden_size 8 is not a multiple of num_attention_heads 3",
        ),
        (
            GOOD.replace("num_attention_heads: 2\n", ""),
            "num_attention_heads: required key is missing",
        ),
        (
            GOOD + "sliding_window: 4\nlayer_types: [full_attention, full_attention]\n"
            "layer_types_pattern: [full_attention]\n",
            "give one of them, not both",
        ),
        ("name: x\n  foo: [1\n", ":2: malformed YAML"),
        ("- 1\n- 2\n", "a spec must be a mapping of keys to values, this is a list"),
        ("", "a spec must be a mapping of keys to values, this is empty"),
        ("just text\n", "this is a str"),
    ],
    ids=[
        "unknown-key",
        "zero-size",
        "negative",
        "bad-dtype",
        "bad-state-dtype",
        "length",
        "unknown-kind",
        "no-window",
        "mla-no-rope",
        "mamba-fields",
        "linear-fields",
        "head-dim-undivisible",
        "missing",
        "both-forms",
        "malformed",
        "list",
        "empty",
        "scalar",
    ],
)
def test_bad_spec_is_one_line_naming_file_and_field(
    write_spec: Callable[[str, str], Path], text: str, expected: str
) -> None:
    path = write_spec(text, "bad.yaml")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    message = str(info.value)
    assert message.startswith(str(path))
    assert expected in message
    assert "Traceback" not in message


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot read"):
        load_spec(tmp_path / "missing.yaml")


def test_not_utf8(write_spec: Callable[[str, str], Path], tmp_path: Path) -> None:
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"\xff\xfe\x00name")
    with pytest.raises(SpecError, match="not UTF-8"):
        load_spec(path)


def test_spec_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - the subclassing is what is tested
        parse_spec({"name": "x"})


def test_unsafe_yaml_tags_are_refused(write_spec: Callable[[str, str], Path]) -> None:
    path = write_spec("name: !!python/object/apply:os.system ['true']\n", "evil.yaml")
    with pytest.raises(SpecError, match="malformed YAML"):
        load_spec(path)


# --- bounds and strict types ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"num_hidden_layers": True}, "num_hidden_layers: input should be a valid integer"),
        ({"num_hidden_layers": 4.0}, "num_hidden_layers: input should be a valid integer"),
        ({"num_hidden_layers": "4"}, "num_hidden_layers: input should be a valid integer"),
        ({"num_hidden_layers": 10_001}, "less than or equal to 10000"),
        ({"num_hidden_layers": 10**400}, "less than or equal to 10000"),
        ({"head_dim": 2**24 + 1}, "head_dim: input should be less than or equal to 16777216"),
        ({"sliding_window": 2**40 + 1}, "sliding_window: input should be less than or equal"),
        ({"num_parameters": 2**50 + 1}, "num_parameters: input should be less than or equal"),
        ({"name": "x" * 257}, "name: string should have at most 256 characters"),
        ({"torch_dtype": ["bfloat16"]}, "torch_dtype: input should be a valid string"),
        ({"use_sliding_window": "yes"}, "use_sliding_window: input should be a valid boolean"),
        ({"layer_types": "full_attention"}, "layer_types: input should be a valid tuple"),
        # GQA: 8 query heads share KV heads in whole groups
        ({"num_key_value_heads": 16}, "num_key_value_heads: 16 is more than num_attention_heads 8"),
        (
            {"num_key_value_heads": 3},
            "num_key_value_heads: 3 does not divide num_attention_heads 8",
        ),
    ],
    ids=[
        "bool",
        "float",
        "string",
        "10001-layers",
        "400-digits",
        "head-dim",
        "window",
        "parameters",
        "long-name",
        "dtype-list",
        "bool-string",
        "layer-types-string",
        "kv-above",
        "kv-not-dividing",
    ],
)
def test_values_beyond_bounds_or_of_the_wrong_type(
    overrides: dict[str, object], problem: str
) -> None:
    with pytest.raises(SpecError) as info:
        spec(**overrides)
    assert problem in str(info.value)
    assert len(info.value.problems) == 1


def test_bounds_hold_at_the_limit() -> None:
    s = spec(num_hidden_layers=10_000, num_key_value_heads=8, sliding_window=2**40)
    assert len(s.layers) == 10_000
    assert s.layer_groups[0][1] == 10_000


def test_limits_documented_match_the_code() -> None:
    from kvplan.model.limits import MAX_DIM, MAX_LAYERS, MAX_NAME_CHARS, MAX_PARAMETERS, MAX_TOKENS
    from kvplan.units import MAX_DIGITS
    from kvplan.validation import MAX_ALIAS_VALUES

    doc = (Path(__file__).parent.parent / "docs" / "spec.md").read_text(encoding="utf-8")
    limits = doc.split("## Limits", 1)[1].split("\n## ", 1)[0]
    for value in (MAX_LAYERS, MAX_DIM, MAX_TOKENS, MAX_PARAMETERS, MAX_ALIAS_VALUES):
        assert f"{value:,}" in limits, value
    assert f"{MAX_NAME_CHARS} characters" in limits
    assert f"{MAX_DIGITS} digits" in limits


def test_many_problems_are_capped_and_deduplicated(write_spec: Callable[[str, str], Path]) -> None:
    text = "name: x\nnum_hidden_layers: 4\nnum_attention_heads: 2\nhead_dim: 3\ntorch_dtype: bf16\n"
    path = write_spec(text + "".join(f"k{i}: 1\n" for i in range(2000)), "many.yaml")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    problems = info.value.problems
    assert len(problems) == 6  # 5 listed, then the count of the other 1,995
    assert problems[0] == "k0: unknown key; allowed keys are listed in docs/spec.md"
    assert info.value.lines[0] == 6  # k0 is the sixth line
    assert problems[-1] == "... and 1,995 more problems"


def test_aliases_cannot_expand_a_file_without_bound(write_spec: Callable[[str, str], Path]) -> None:
    # 9 levels of 9 aliases each: 9**9 = 387,420,489 values from a few hundred bytes
    lines = ["l0: &l0 [" + ", ".join(["x"] * 9) + "]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 9)]
    path = write_spec("\n".join(lines) + "\n", "bomb.yaml")
    with pytest.raises(SpecError, match="aliases expand the file by more than 100,000 values"):
        load_spec(path)


def test_shared_settings_by_alias_still_work(write_spec: Callable[[str, str], Path]) -> None:
    text = (
        "name: x\nnum_hidden_layers: &n 4\nnum_attention_heads: *n\nhead_dim: 3\n"
        "torch_dtype: bf16\n"
    )
    assert load_spec(write_spec(text, "alias.yaml")).num_attention_heads == 4


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("a: &a [*a]\n", ":1: malformed YAML: an alias refers to itself"),
        ("num_hidden_layers: " + "9" * 5000 + "\n", ":1: an integer of 5,000 characters"),
        ("x: " + "[" * 5000 + "\n", "malformed YAML"),
        ("name: 2024-13-45\n", "malformed YAML: month must be in 1..12"),
        ("a: 1\n---\nb: 2\n", "malformed YAML"),
    ],
    ids=["recursive", "5000-digits", "deep", "bad-date", "two-documents"],
)
def test_hostile_yaml_is_one_line(
    write_spec: Callable[[str, str], Path], text: str, problem: str
) -> None:
    path = write_spec(text, "h.yaml")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert problem in str(info.value)
    assert len(info.value.problems) == 1


def test_not_regular_files_are_refused(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero"), tmp_path):
        with pytest.raises(SpecError, match=r"cannot read: (not a regular file|is a folder)"):
            load_spec(path)
