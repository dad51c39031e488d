"""A Hub id the catalog lacks is answered in every command, from a Hub served here, and offline
from the Hugging Face cache afterwards.

The test Hub (tests/hub_server.py) holds ``acme/tiny-llama``: 2 layers, 4 KV heads of 64, bf16.
By hand, one token of one sequence is 2 (K and V) x 2 layers x 4 heads x 64 x 2 B = 2,048 B, so
a context of 4,096 tokens is 8,388,608 B (8 MiB). kvplan runs in a child process so that the
client reads HF_ENDPOINT, HF_HOME and HF_HUB_OFFLINE as it does for a user.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hub_server import SHA, Hub, hub_env, run_kvplan, serve

pytest.importorskip("huggingface_hub")

REPO = "acme/tiny-llama"
BYTES_PER_TOKEN = 2 * 2 * 4 * 64 * 2  # 2,048
AT_4K = 4096 * BYTES_PER_TOKEN  # 8,388,608


@pytest.fixture(scope="module")
def hub() -> Iterator[Hub]:
    with serve() as server:
        yield server


def _json(env: dict[str, str], *args: str) -> dict[str, object]:
    done, _ = run_kvplan(env, *args, "--format", "json")
    assert done.returncode in (0, 1), done.stderr
    data: dict[str, object] = json.loads(done.stdout)
    return data


def test_calc_reads_a_hub_id_and_says_where_from(hub: Hub, tmp_path: Path) -> None:
    env = hub_env(tmp_path, hub.url)
    data = _json(env, "calc", REPO, "-c", "4K")
    assert (data["kv_cache_bytes"], data["bytes_per_token"]) == (AT_4K, BYTES_PER_TOKEN)
    assert data["resolved_from"] == REPO
    assert data["provenance"] == [
        f"read from the Hub: {REPO} at {SHA}; weights from its safetensors headers"
    ]
    # and again with the network gone: the same figure, from the cache
    offline = hub_env(tmp_path, hub.url, HF_HUB_OFFLINE="1")
    again = _json(offline, "calc", REPO, "-c", "4K")
    assert again["kv_cache_bytes"] == AT_4K
    assert again["provenance"] == [
        f"read from the Hugging Face cache: {REPO} at {SHA}; weights from its safetensors headers"
    ]


def test_offline_plans_with_the_weights_the_hub_gave(hub: Hub, tmp_path: Path) -> None:
    # the fp8 repo: its linear weights in F8_E4M3 with block scales, the rest bf16; offline the
    # count kept from the headers gives the same plan, and says where it came from
    args = ("plan", "acme/tiny-llama-fp8", "--gpu", "h100", "-c", "4K")
    online = _json(hub_env(tmp_path, hub.url), *args)
    offline = _json(hub_env(tmp_path, hub.url, HF_HUB_OFFLINE="1"), *args)
    assert online["weights_bytes"] == offline["weights_bytes"]
    assert offline["provenance"] == [
        f"read from the Hugging Face cache: acme/tiny-llama-fp8 at {SHA}; weights from its"
        " safetensors headers"
    ]
    assert online["weights_format"] == offline["weights_format"]
    assert str(online["weights_format"]).startswith("fp8_block128 for 30,408,704 parameters")
    kept = tmp_path / ".cache" / "kvplan" / "hub-weights" / f"acme--tiny-llama-fp8--{SHA}.json"
    kept.write_text('{"num_parameters": "many"}')  # not a count kvplan wrote: ignored
    shapes = _json(hub_env(tmp_path, hub.url, HF_HUB_OFFLINE="1"), *args)
    assert shapes["provenance"][-1] == (  # type: ignore[index]
        f"read from the Hugging Face cache: acme/tiny-llama-fp8 at {SHA}"
    )
    assert "computed from the config's shapes" in shapes["provenance"][0]  # type: ignore[index]


@pytest.mark.parametrize(
    "args",
    [
        ["plan", REPO, "--gpu", "h100", "-c", "4K", "--concurrency", "1"],
        ["flags", REPO, "--gpu", "h100", "-c", "4K", "-n", "1"],
        ["compare", REPO, "llama-3.1-8b", "-c", "4K"],
        ["perf", REPO, "--gpu", "h100", "-c", "4K"],
        ["show", REPO],
    ],
    ids=["plan", "flags", "compare", "perf", "show"],
)
def test_every_command_takes_a_hub_id(hub: Hub, tmp_path: Path, args: list[str]) -> None:
    done, seconds = run_kvplan(hub_env(tmp_path, hub.url), *args)
    assert done.returncode in (0, 1), done.stderr
    assert "Traceback" not in done.stderr
    assert "tiny-llama" in done.stdout
    assert seconds < 30


def test_compare_and_perf_give_the_figure_by_hand(hub: Hub, tmp_path: Path) -> None:
    env = hub_env(tmp_path, hub.url)
    compared = _json(env, "compare", REPO, "llama-3.1-8b", "-c", "4K")
    first = compared["models"][0]  # type: ignore[index]
    assert (first["bytes_per_token"], first["kv_cache_bytes"]) == (BYTES_PER_TOKEN, AT_4K)
    # one decode step at 4,096 tokens reads the whole cache and writes one token's K and V
    decode = _json(env, "perf", REPO, "--gpu", "h100", "-c", "4K")["decode"]
    assert (decode["kv_read_bytes"], decode["kv_write_bytes"]) == (AT_4K, BYTES_PER_TOKEN)  # type: ignore[index]


def test_a_budget_names_a_hub_id(hub: Hub, tmp_path: Path) -> None:
    budget = tmp_path / "budget.yaml"
    budget.write_text(
        "deployments:\n"
        f"  - {{name: tiny, model: {REPO}, gpu: h100, max_model_len: 4K,"
        f" expect: {{max_kv_bytes_per_token: {BYTES_PER_TOKEN}}}}}\n"
    )
    # a name inside a file reaches the Hub only when the user allows it
    hub.log.clear()
    done, _ = run_kvplan(hub_env(tmp_path, hub.url), "check", str(budget))
    assert done.returncode == 2
    assert "read from the Hub only with --allow-hub" in done.stderr
    assert hub.log == []
    done, _ = run_kvplan(hub_env(tmp_path, hub.url), "check", "--allow-hub", str(budget))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "max_kv_bytes_per_token" in done.stdout
    assert "pass" in done.stdout


def test_the_library_loads_a_hub_id(hub: Hub, tmp_path: Path) -> None:
    script = (
        "import kvplan; s = kvplan.load_model('acme/tiny-llama');"
        " print(kvplan.bytes_per_token(s, 'bfloat16'), s.hf_id)"
    )
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=hub_env(tmp_path, hub.url),
        timeout=60,
    )
    assert done.stdout.split() == [str(BYTES_PER_TOKEN), REPO], done.stderr


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({}, "nor is it on the Hub (no model acme/nosuch on the Hub"),
        ({"HF_HUB_OFFLINE": "1"}, "HF_HUB_OFFLINE is set and the cache lacks it"),
    ],
    ids=["the Hub has no such repo", "offline with an empty cache"],
)
def test_a_hub_id_nowhere_is_one_line_exit_2(
    hub: Hub, tmp_path: Path, extra: dict[str, str], expected: str
) -> None:
    done, seconds = run_kvplan(hub_env(tmp_path, hub.url, **extra), "calc", "acme/nosuch")
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("kvplan: error: model 'acme/nosuch' is not in the catalog")
    assert expected in lines[0]
    assert seconds < 10


def test_a_gated_hub_id_is_exit_3(hub: Hub, tmp_path: Path) -> None:
    done, _ = run_kvplan(hub_env(tmp_path, hub.url), "calc", "acme/gated-llama")
    assert done.returncode == 3
    assert done.stderr.splitlines() == [
        "kvplan: error: model 'acme/gated-llama' is not in the catalog; gated model: accept"
        " its licence on the Hub and set HF_TOKEN"
    ]


def test_a_bundled_name_never_asks_the_hub(hub: Hub, tmp_path: Path) -> None:
    hub.log.clear()
    done, _ = run_kvplan(hub_env(tmp_path, hub.url), "calc", "meta-llama/Llama-3.1-8B")
    assert done.returncode == 0
    assert hub.log == []


# --- LoRA adapters: served on their base model's cache -----------------------------------------


def test_an_adapter_is_sized_as_its_base_on_the_hub(hub: Hub, tmp_path: Path) -> None:
    data = _json(hub_env(tmp_path, hub.url), "calc", "acme/tiny-lora", "-c", "4K")
    assert data["kv_cache_bytes"] == AT_4K  # the base acme/tiny-llama, by hand above
    assert data["provenance"][0] == (  # type: ignore[index]
        f"read from the Hub: {REPO} at {SHA}; weights from its safetensors headers"
    )
    assert data["provenance"][1] == (  # type: ignore[index]
        f"a LoRA adapter read from the Hub: acme/tiny-lora at {SHA}, served on its base {REPO}"
        " (the adapter's own weights are not counted)"
    )


def test_an_adapter_on_a_bundled_base(hub: Hub, tmp_path: Path) -> None:
    # Llama 3.1 8B: 2 x 32 layers x 8 KV heads x 128 x 2 B = 131,072 B a token
    data = _json(hub_env(tmp_path, hub.url), "calc", "acme/llama-lora", "-c", "4K")
    assert (data["model"], data["bytes_per_token"]) == ("llama-3.1-8b", 131_072)


@pytest.mark.parametrize(
    ("repo", "expected"),
    [
        ("acme/path-lora", "base_model_name_or_path: a Hub id or a catalog model's name"),
        ("acme/lora-of-lora", "acme/tiny-lora: the base is itself a LoRA adapter (on acme/tiny"),
    ],
)
def test_an_adapter_names_no_path_and_no_adapter(
    hub: Hub, tmp_path: Path, repo: str, expected: str
) -> None:
    done, _ = run_kvplan(hub_env(tmp_path, hub.url), "calc", repo)
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1, lines
    assert expected in lines[0]


# --- a GGUF repository by its quantization tag: the one file's header, by range requests ------


def _gguf_repo(hub: Hub, tmp_path: Path, num_tokens: int) -> int:
    """acme/Tiny-GGUF with a Q4_K_M and a Q8_0 file; returns the Q4_K_M file's size."""
    pytest.importorskip("gguf")
    from hub_server import Blob, Repo
    from test_gguf import _llama_keys, _llama_tensors, write_gguf

    repo = Repo({"README.md": Blob(b"tiny", 4)})
    tmp_path.mkdir(parents=True, exist_ok=True)
    for quant in ("Q4_K_M", "Q8_0"):
        path = write_gguf(
            tmp_path / f"Tiny-{quant}.gguf", "llama", _llama_keys(), _llama_tensors(),
            num_tokens=num_tokens,
        )[0]  # fmt: skip
        data = path.read_bytes()
        head = data.rstrip(b"\0") or data[:1]  # the data section is a hole
        repo.files[path.name] = Blob(head, len(data))
    hub.repos["acme/Tiny-GGUF"] = repo
    return (tmp_path / "Tiny-Q4_K_M.gguf").stat().st_size


def test_a_gguf_repo_reads_the_tagged_file_by_its_header(hub: Hub, tmp_path: Path) -> None:
    size = _gguf_repo(hub, tmp_path / "files", num_tokens=300_000)  # a header past 4 MiB
    hub.log.clear()
    data = _json(hub_env(tmp_path, hub.url), "calc", "acme/Tiny-GGUF:Q4_K_M", "-c", "4K")
    # the tiny llama of tests/test_gguf.py: 2 layers x 8 KV heads x 128 x 2 (K, V); the cache
    # in llama.cpp's f16: 2 x 2 x 8 x 128 x 2 B = 8,192 B a token
    assert data["bytes_per_token"] == 8_192
    assert data["provenance"][-1].startswith(  # type: ignore[index]
        f"read from the Hub: acme/Tiny-GGUF at {SHA}, the Q4_K_M .gguf file's header"
    )
    ranges = [r.range for r in hub.requests("Tiny-Q4_K_M.gguf")]
    assert ranges == ["bytes=0-4194303", "bytes=0-16777215"]  # 4 MiB, then 16 MiB
    assert not hub.requests("Tiny-Q8_0.gguf")  # and no byte of the tensors was asked for
    assert size > 200 * 2**20  # the file the header describes: hundreds of MiB of tensors


def test_a_gguf_repo_without_the_tag_lists_its_tags(hub: Hub, tmp_path: Path) -> None:
    _gguf_repo(hub, tmp_path / "files", num_tokens=100)
    done, _ = run_kvplan(hub_env(tmp_path, hub.url), "calc", "acme/Tiny-GGUF:Q2_K")
    assert done.returncode == 2
    assert "no .gguf file of quantization Q2_K; the repository has: Q4_K_M, Q8_0" in done.stderr


def test_a_gguf_repo_read_once_answers_offline_from_the_kept_header(
    hub: Hub, tmp_path: Path
) -> None:
    _gguf_repo(hub, tmp_path / "files", num_tokens=100)
    args = ("plan", "acme/Tiny-GGUF:Q4_K_M", "--gpu", "H100", "-c", "4K")
    online = _json(hub_env(tmp_path, hub.url), *args)
    hub.log.clear()
    offline_env = hub_env(tmp_path, hub.url, HF_HUB_OFFLINE="1")
    offline = _json(offline_env, *args)
    assert not hub.log  # not one request
    # the same tiny llama as above, its weights from the same header: the same plan
    assert {k: v for k, v in offline.items() if k != "provenance"} == {
        k: v for k, v in online.items() if k != "provenance"
    }
    assert offline["provenance"][-1].startswith(  # type: ignore[index]
        f"read from kvplan's cache of the Hub: acme/Tiny-GGUF at {SHA}, the Q4_K_M"
    )
    # a tag never read online is not in the cache: one line, no traceback
    done, seconds = run_kvplan(offline_env, "calc", "acme/Tiny-GGUF:Q8_0")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "HF_HUB_OFFLINE is set and the cache lacks it" in done.stderr
    assert seconds < 20
    # a manifest that is not kvplan's is a cache miss, never a read of what it names
    kept = tmp_path / ".cache" / "kvplan" / "hub-gguf" / "acme--Tiny-GGUF"
    manifest = kept / "main--Q4_K_M.json"
    manifest.write_text(json.dumps({"commit": SHA, "parts": [["../../../etc/passwd.gguf", 9]]}))
    done, _ = run_kvplan(offline_env, "calc", "acme/Tiny-GGUF:Q4_K_M")
    assert done.returncode == 2
    assert "the cache lacks it" in done.stderr
