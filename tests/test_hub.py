"""``kvplan import --hub`` against a small Hub served here (tests/hub_server.py).

kvplan runs in a child process so that it reads HF_ENDPOINT, HF_HOME and HF_HUB_OFFLINE from
its environment, as it does for a user; the server logs every request, so the tests can show
that only headers are read.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hub_server import (
    NUM_LINEAR,
    NUM_PARAMETERS,
    SHA,
    TOKEN,
    Hub,
    closed_port,
    hub_env,
    run_kvplan,
    serve,
)

from kvplan.importers.safetensors import DTYPE_BITS

pytest.importorskip("huggingface_hub")


@pytest.fixture(scope="module")
def hub() -> Iterator[Hub]:
    with serve() as server:
        yield server


@pytest.mark.parametrize("revision", ["@main", f"@{SHA}"])
def test_sharded_checkpoint_from_headers_only(hub: Hub, tmp_path: Path, revision: str) -> None:
    hub.log.clear()
    done, _ = run_kvplan(
        hub_env(tmp_path, hub.url), "import", "--hub", f"acme/tiny-llama{revision}"
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    spec = yaml.safe_load(done.stdout)
    assert spec["name"] == "tiny-llama"
    assert spec["hf_id"] == "acme/tiny-llama"
    assert (spec["num_hidden_layers"], spec["num_key_value_heads"]) == (2, 4)
    assert spec["hidden_size"] // spec["num_attention_heads"] == 64  # head_dim 1024 / 16
    assert spec["num_parameters"] == NUM_PARAMETERS
    assert "from safetensors headers of 2 file(s) on the Hub" in done.stdout
    # Only headers: each shard is read by range requests, its first 100,000 bytes
    # (bytes=0-99999) and no more, against shards of tens of MB.
    repo = hub.repos["acme/tiny-llama"]
    for shard, end in repo.header_ends.items():
        reads = hub.requests(shard)
        assert reads, shard
        assert all(r.method == "GET" and r.range is not None for r in reads), reads
        assert sum(r.num_bytes for r in reads) <= max(100_001, end)
        assert repo.files[shard].size > 30 * 10**6  # 15.2 M BF16 parameters and more


def test_fp8_single_file_counts_formats(hub: Hub, tmp_path: Path) -> None:
    done, _ = run_kvplan(hub_env(tmp_path, hub.url), "import", "--hub", "acme/tiny-llama-fp8")
    assert done.returncode == 0, done.stderr
    spec = yaml.safe_load(done.stdout)
    assert spec["num_parameters"] == NUM_PARAMETERS  # the scales are storage, not parameters
    assert spec["num_quantized_parameters"] == NUM_LINEAR
    assert spec["weight_dtype"] == "fp8_e4m3"
    # BF16: 95,949,824 - 30,408,704 = 65,541,120 (embeddings, lm_head, norms)
    assert "BF16 65,541,120, F8_E4M3 30,408,704" in done.stdout


def test_offline_answers_from_the_cache(hub: Hub, tmp_path: Path) -> None:
    online, _ = run_kvplan(hub_env(tmp_path, hub.url), "import", "--hub", "acme/tiny-llama")
    assert online.returncode == 0, online.stderr
    assert yaml.safe_load(online.stdout)["num_parameters"] == NUM_PARAMETERS
    hub.log.clear()
    env = hub_env(tmp_path, hub.url, HF_HUB_OFFLINE="1")
    done, _ = run_kvplan(env, "import", "--hub", "acme/tiny-llama")
    assert done.returncode == 0, done.stderr
    assert hub.log == []
    # the count its headers gave online, kept per commit (without it, the cached index's
    # total_size 191,899,648 B / 2 B per bfloat16 parameter would give the same number)
    assert yaml.safe_load(done.stdout)["num_parameters"] == NUM_PARAMETERS == 191_899_648 // 2
    assert "kept from the Hub" in done.stdout


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"HF_HUB_OFFLINE": "1"}, "HF_HUB_OFFLINE is set, and it is not in the Hugging Face cache"),
        ({"HF_ENDPOINT": "closed"}, "Connection refused"),
    ],
    ids=["HF_HUB_OFFLINE with an empty cache", "an endpoint on a closed port"],
)
def test_offline_fails_fast_with_one_line(
    hub: Hub, tmp_path: Path, env: dict[str, str], message: str
) -> None:
    endpoint = hub.url if "HF_HUB_OFFLINE" in env else f"http://127.0.0.1:{closed_port()}"
    extra = {k: v for k, v in env.items() if k != "HF_ENDPOINT"}
    done, elapsed_s = run_kvplan(
        hub_env(tmp_path, endpoint, **extra), "import", "--hub", "acme/tiny-llama"
    )
    assert done.returncode == 3
    assert elapsed_s < 5, elapsed_s
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("kvplan: error: --hub acme/tiny-llama: ")
    assert message in done.stderr


@pytest.mark.parametrize(
    ("token", "status"), [(None, 401), ("hf_not_accepted", 403)], ids=["anonymous", "token"]
)
def test_gated_is_one_line(hub: Hub, tmp_path: Path, token: str | None, status: int) -> None:
    hub.log.clear()
    env = hub_env(tmp_path, hub.url, **({"HF_TOKEN": token} if token else {}))
    done, _ = run_kvplan(env, "import", "--hub", "acme/gated-llama")
    assert done.returncode == 3
    assert done.stderr == (
        "kvplan: error: --hub acme/gated-llama: gated model: accept its licence on the Hub"
        " and set HF_TOKEN\n"
    )
    assert [r.status for r in hub.requests("config.json")] == [status]


def test_gated_with_an_accepted_token(hub: Hub, tmp_path: Path) -> None:
    done, _ = run_kvplan(
        hub_env(tmp_path, hub.url, HF_TOKEN=TOKEN), "import", "--hub", "acme/gated-llama"
    )
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout)["num_parameters"] == NUM_PARAMETERS


@pytest.mark.parametrize(
    ("hub_id", "code", "message"),
    [
        ("acme/missing", 2, "no model acme/missing on the Hub (a private one needs HF_TOKEN)"),
        ("acme/tiny-llama@nope", 2, "acme/tiny-llama has no revision 'nope'"),
    ],
)
def test_unknown_repo_or_revision_exit_2(
    hub: Hub, tmp_path: Path, hub_id: str, code: int, message: str
) -> None:
    done, _ = run_kvplan(hub_env(tmp_path, hub.url), "import", "--hub", hub_id)
    assert done.returncode == code
    assert done.stderr.count("\n") == 1, done.stderr
    assert message in done.stderr


def test_a_malformed_header_names_the_file_on_the_hub(hub: Hub, tmp_path: Path) -> None:
    done, _ = run_kvplan(hub_env(tmp_path, hub.url), "import", "--hub", "acme/bad-header")
    assert done.returncode == 2
    assert done.stderr == (
        "kvplan: error: acme/bad-header@main/model.safetensors: not a safetensors file:"
        f" w: dtype 'bf16' is not a safetensors dtype; one of {', '.join(DTYPE_BITS)}\n"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("acme/tiny-llama", ("acme/tiny-llama", None)),
        ("acme/tiny-llama@main", ("acme/tiny-llama", "main")),
        (f"acme/tiny-llama@{SHA}", ("acme/tiny-llama", SHA)),
        ("acme/tiny-llama@refs/pr/1", ("acme/tiny-llama", "refs/pr/1")),
        ("Qwen/Qwen3-8B@v1.0", ("Qwen/Qwen3-8B", "v1.0")),
    ],
)
def test_hub_id_syntax(text: str, expected: tuple[str, str | None]) -> None:
    from kvplan.importers.hub import parse_hub_id

    assert parse_hub_id(text) == expected


@pytest.mark.parametrize(
    "text", ["acme", "acme/tiny-llama@", "acme/a b", "a/b/c", "acme/../x", "acme/x@../main", ""]
)
def test_malformed_hub_ids_exit_2(text: str) -> None:
    from typer.testing import CliRunner

    from kvplan.cli import app

    result = CliRunner().invoke(app, ["import", "--hub", text])
    assert result.exit_code == 2
    assert result.stderr == (
        f"kvplan: error: --hub: expected ORG/NAME or ORG/NAME@REVISION, got {text!r}\n"
    )


def test_the_extra_hint_word_for_word(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from kvplan.cli import app

    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    result = CliRunner().invoke(app, ["import", "--hub", "acme/tiny-llama"])
    assert result.exit_code == 3
    assert result.stderr == (
        "kvplan: error: --hub needs huggingface_hub, which kvplan does not install by default:"
        " pip install 'kvplan[hub]'\n"
    )


def test_help_and_calc_do_not_import_the_client(tmp_path: Path) -> None:
    probe = (
        "import sys, runpy\n"
        "for argv in (['kvplan', '--help'], ['kvplan', 'calc', 'llama-3.1-8b', '-c', '4']):\n"
        "    sys.argv = argv\n"
        "    try:\n        runpy.run_module('kvplan', run_name='__main__')\n"
        "    except SystemExit:\n        pass\n"
        "print('LOADED', 'huggingface_hub' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert "LOADED False" in done.stdout
