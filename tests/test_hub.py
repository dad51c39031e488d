"""``kvplan import --hub`` with the real huggingface_hub client against a small Hub served here.

The server answers what the client asks for: the model API (``/api/models/{repo}/revision/
{rev}``), ``HEAD`` and ``GET`` of ``/{repo}/resolve/{rev}/{file}`` with the ETag and
X-Repo-Commit headers, and HTTP range requests into safetensors files whose tensor data (tens of
MB of zeros) is never stored. It logs every request, so the tests can show that only headers are
read. kvplan runs in a child process so that the client reads HF_ENDPOINT, HF_HOME and
HF_HUB_OFFLINE from its environment, as it does for a user.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
import yaml

pytest.importorskip("huggingface_hub")

SHA = "0123456789abcdef0123456789abcdef01234567"
TOKEN = "hf_accepted_licence"

# A llama of 2 layers: hidden 1024, 16 heads of 64, 4 KV heads (K and V 4 x 64 = 256 wide),
# MLP 4096, vocabulary 32000, bfloat16.
CONFIG = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "num_hidden_layers": 2,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "vocab_size": 32000,
    "torch_dtype": "bfloat16",
    "max_position_embeddings": 8192,
    "tie_word_embeddings": False,
}
# Parameters, by hand: embeddings and lm_head 2 x 32000 x 1024 = 65,536,000; per layer q and o
# 2 x 1024 x 1024 = 2,097,152, k and v 2 x 256 x 1024 = 524,288, MLP 3 x 1024 x 4096 =
# 12,582,912, two norms 2,048: 15,206,400; two layers 30,412,800; final norm 1,024.
NUM_PARAMETERS = 65_536_000 + 30_412_800 + 1_024  # 95,949,824
# The linear weights of the two layers: 2 x (2,097,152 + 524,288 + 12,582,912) = 30,408,704.
NUM_LINEAR = 30_408_704
FP8 = {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}


def _layer(i: int, linear: str = "BF16") -> dict[str, list[Any]]:
    p = f"model.layers.{i}."
    shapes = {
        "self_attn.q_proj": [1024, 1024],
        "self_attn.k_proj": [256, 1024],
        "self_attn.v_proj": [256, 1024],
        "self_attn.o_proj": [1024, 1024],
        "mlp.gate_proj": [4096, 1024],
        "mlp.up_proj": [4096, 1024],
        "mlp.down_proj": [1024, 4096],
    }
    tensors: dict[str, list[Any]] = {}
    for name, shape in shapes.items():
        tensors[f"{p}{name}.weight"] = [linear, shape]
        if linear == "F8_E4M3":  # one scale per 128 x 128 block: storage, not parameters
            tensors[f"{p}{name}.weight_scale_inv"] = ["F32", [shape[0] // 128, shape[1] // 128]]
    tensors[f"{p}input_layernorm.weight"] = ["BF16", [1024]]
    tensors[f"{p}post_attention_layernorm.weight"] = ["BF16", [1024]]
    return tensors


_WIDTH = {"BF16": 2, "F32": 4, "F8_E4M3": 1}


@dataclass
class Blob:
    """A file on the served Hub: its leading bytes and its full size (the rest reads as zeros)."""

    head: bytes
    size: int

    def read(self, start: int, end: int) -> bytes:
        """Bytes ``start`` to ``end`` inclusive."""
        body = self.head[start : end + 1]
        return body + b"\0" * (end + 1 - start - len(body))


def _safetensors(tensors: dict[str, list[Any]]) -> tuple[Blob, int]:
    """A safetensors file: 8-byte little-endian length, the JSON header, then the data."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        n = _WIDTH[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    head = struct.pack("<Q", len(raw)) + raw
    return Blob(head, len(head) + offset), len(head)


def _json(data: Any) -> Blob:
    raw = json.dumps(data).encode()
    return Blob(raw, len(raw))


@dataclass
class Repo:
    files: dict[str, Blob]
    header_ends: dict[str, int] = field(default_factory=dict)
    gated: bool = False


def _repos() -> dict[str, Repo]:
    first = {"model.embed_tokens.weight": ["BF16", [32000, 1024]], **_layer(0)}
    second = {
        **_layer(1),
        "model.norm.weight": ["BF16", [1024]],
        "lm_head.weight": ["BF16", [32000, 1024]],
    }
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    sharded = Repo({"config.json": _json(CONFIG)})
    for shard, tensors in zip(names, (first, second), strict=True):
        sharded.files[shard], sharded.header_ends[shard] = _safetensors(tensors)
    index = {
        "metadata": {"total_size": NUM_PARAMETERS * 2},
        "weight_map": {
            t: shard for shard, ts in zip(names, (first, second), strict=True) for t in ts
        },
    }
    sharded.files["model.safetensors.index.json"] = _json(index)
    single = {
        "model.embed_tokens.weight": ["BF16", [32000, 1024]],
        **_layer(0, "F8_E4M3"),
        **_layer(1, "F8_E4M3"),
        "model.norm.weight": ["BF16", [1024]],
        "lm_head.weight": ["BF16", [32000, 1024]],
    }
    fp8 = Repo({"config.json": _json({**CONFIG, "quantization_config": FP8})})
    fp8.files["model.safetensors"], fp8.header_ends["model.safetensors"] = _safetensors(single)
    gated = Repo(dict(sharded.files), dict(sharded.header_ends), gated=True)
    bad = Repo({"config.json": _json(CONFIG)})
    bad.files["model.safetensors"], _ = _safetensors({"w": ["BF16", [1024, 1024]]})
    bad.files["model.safetensors"].head = bad.files["model.safetensors"].head.replace(
        b'"BF16"', b'"bf16"'
    )
    return {
        "acme/tiny-llama": sharded,
        "acme/tiny-llama-fp8": fp8,
        "acme/gated-llama": gated,
        "acme/bad-header": bad,
    }


class Hub(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.repos = _repos()
        self.log: list[
            tuple[str, str, str | None, int, int]
        ] = []  # method, path, range, status, bytes

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Hub

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def do_GET(self) -> None:
        self._answer(body=True)

    def _answer(self, body: bool) -> None:
        path = unquote(urlsplit(self.path).path)
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"] and len(parts) == 6 and parts[4] == "revision":
            self._model_info("/".join(parts[2:4]), parts[5], body)
        elif len(parts) >= 5 and parts[2] == "resolve":
            self._resolve("/".join(parts[:2]), parts[3], "/".join(parts[4:]), body)
        else:
            self._send(404, Blob(b"", 0), body, {"X-Error-Code": "RepoNotFound"})

    def _model_info(self, repo_id: str, revision: str, body: bool) -> None:
        repo = self.server.repos.get(repo_id)
        if repo is None:
            self._send(
                404,
                _json({"error": "Repository not found"}),
                body,
                {"X-Error-Code": "RepoNotFound"},
            )
        elif revision not in ("main", SHA):
            self._send(
                404,
                _json({"error": "Revision not found"}),
                body,
                {"X-Error-Code": "RevisionNotFound"},
            )
        else:
            siblings = [{"rfilename": name} for name in sorted(repo.files)]
            info = {
                "id": repo_id,
                "sha": SHA,
                "siblings": siblings,
                "gated": "manual" if repo.gated else False,
            }
            self._send(200, _json(info), body, {})

    def _resolve(self, repo_id: str, revision: str, filename: str, body: bool) -> None:
        repo = self.server.repos.get(repo_id)
        auth = self.headers.get("Authorization")
        if repo is None or revision not in ("main", SHA):
            self._send(404, Blob(b"", 0), body, {"X-Error-Code": "RepoNotFound"})
        elif repo.gated and auth != f"Bearer {TOKEN}":  # 401 anonymous, 403 not accepted
            code = 401 if auth is None else 403
            self._send(code, Blob(b"", 0), body, {"X-Error-Code": "GatedRepo"})
        elif filename not in repo.files:
            self._send(
                404, Blob(b"", 0), body, {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": SHA}
            )
        else:
            blob = repo.files[filename]
            etag = hashlib.sha256(f"{repo_id}/{filename}".encode()).hexdigest()
            self._send(200, blob, body, {"ETag": f'"{etag}"', "X-Repo-Commit": SHA})

    def _send(self, code: int, blob: Blob, body: bool, headers: dict[str, str]) -> None:
        ranged = self.headers.get("Range")
        start, end = 0, blob.size - 1
        if ranged and code == 200 and body:
            first, _, last = ranged.removeprefix("bytes=").partition("-")
            start, end = int(first), min(int(last), blob.size - 1)
            code = 206
            headers = {**headers, "Content-Range": f"bytes {start}-{end}/{blob.size}"}
        data = blob.read(start, end) if body and blob.size else b""
        self.server.log.append((self.command, self.path, ranged, code, len(data)))
        self.send_response(code)
        for key, value in {**headers, "Accept-Ranges": "bytes"}.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(end - start + 1 if blob.size else 0))
        self.end_headers()
        if data:
            self.wfile.write(data)


@pytest.fixture(scope="module")
def hub() -> Iterator[Hub]:
    server = Hub()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _env(tmp_path: Path, endpoint: str, **extra: str) -> dict[str, str]:
    keep = ("PATH", "SYSTEMROOT", "LANG", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(
        HOME=str(tmp_path),
        HF_HOME=str(tmp_path / "hf"),
        HF_ENDPOINT=endpoint,
        HF_HUB_DISABLE_TELEMETRY="1",
        NO_PROXY="127.0.0.1,localhost",
        PYTHONDONTWRITEBYTECODE="1",
    )
    env.update(extra)
    return env


def _kvplan(env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "kvplan", *args], capture_output=True, text=True, env=env, timeout=60
    )
    return done, time.monotonic() - start


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("revision", ["@main", f"@{SHA}"])
def test_sharded_checkpoint_from_headers_only(hub: Hub, tmp_path: Path, revision: str) -> None:
    hub.log.clear()
    done, _ = _kvplan(_env(tmp_path, hub.url), "import", "--hub", f"acme/tiny-llama{revision}")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    spec = yaml.safe_load(done.stdout)
    assert spec["name"] == "tiny-llama"
    assert spec["hf_id"] == "acme/tiny-llama"
    assert (spec["num_hidden_layers"], spec["num_key_value_heads"]) == (2, 4)
    assert spec["hidden_size"] // spec["num_attention_heads"] == 64  # head_dim 1024 / 16
    assert spec["num_parameters"] == NUM_PARAMETERS
    assert "from safetensors headers of 2 file(s) on the Hub" in done.stdout
    # Only headers: each shard is read by range requests; the client asks for its first
    # 100,001 bytes (bytes=0-100000) and no more, against shards of tens of MB.
    repo = hub.repos["acme/tiny-llama"]
    for shard, end in repo.header_ends.items():
        reads = [(m, r, n) for m, p, r, _, n in hub.log if p.endswith(shard)]
        assert reads, shard
        assert all(m == "GET" and r is not None for m, r, _ in reads), reads
        assert sum(n for _, _, n in reads) <= max(100_001, end)
        assert repo.files[shard].size > 30 * 10**6  # 15.2 M BF16 parameters and more


def test_fp8_single_file_counts_formats(hub: Hub, tmp_path: Path) -> None:
    done, _ = _kvplan(_env(tmp_path, hub.url), "import", "--hub", "acme/tiny-llama-fp8")
    assert done.returncode == 0, done.stderr
    spec = yaml.safe_load(done.stdout)
    assert spec["num_parameters"] == NUM_PARAMETERS  # the scales are storage, not parameters
    assert spec["num_quantized_parameters"] == NUM_LINEAR
    assert spec["weight_dtype"] == "fp8_e4m3"
    # BF16: 95,949,824 - 30,408,704 = 65,541,120 (embeddings, lm_head, norms)
    assert "BF16 65,541,120, F8_E4M3 30,408,704" in done.stdout


def test_offline_answers_from_the_cache(hub: Hub, tmp_path: Path) -> None:
    online, _ = _kvplan(_env(tmp_path, hub.url), "import", "--hub", "acme/tiny-llama")
    assert online.returncode == 0, online.stderr
    assert yaml.safe_load(online.stdout)["num_parameters"] == NUM_PARAMETERS
    hub.log.clear()
    env = _env(tmp_path, hub.url, HF_HUB_OFFLINE="1")
    done, _ = _kvplan(env, "import", "--hub", "acme/tiny-llama")
    assert done.returncode == 0, done.stderr
    assert hub.log == []
    # the cached index: total_size 191,899,648 B / 2 B per bfloat16 parameter
    assert yaml.safe_load(done.stdout)["num_parameters"] == NUM_PARAMETERS
    assert "total_size 191,899,648 B / 2 B" in done.stdout


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
    endpoint = hub.url if "HF_HUB_OFFLINE" in env else f"http://127.0.0.1:{_closed_port()}"
    extra = {k: v for k, v in env.items() if k != "HF_ENDPOINT"}
    done, elapsed_s = _kvplan(
        _env(tmp_path, endpoint, **extra), "import", "--hub", "acme/tiny-llama"
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
    env = _env(tmp_path, hub.url, **({"HF_TOKEN": token} if token else {}))
    done, _ = _kvplan(env, "import", "--hub", "acme/gated-llama")
    assert done.returncode == 3
    assert done.stderr == (
        "kvplan: error: --hub acme/gated-llama: gated model: accept its licence on the Hub"
        " and set HF_TOKEN\n"
    )
    assert [c for _, p, _, c, _ in hub.log if p.endswith("config.json")] == [status]


def test_gated_with_an_accepted_token(hub: Hub, tmp_path: Path) -> None:
    done, _ = _kvplan(
        _env(tmp_path, hub.url, HF_TOKEN=TOKEN), "import", "--hub", "acme/gated-llama"
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
    done, _ = _kvplan(_env(tmp_path, hub.url), "import", "--hub", hub_id)
    assert done.returncode == code
    assert done.stderr.count("\n") == 1, done.stderr
    assert message in done.stderr


def test_a_malformed_header_names_the_file_on_the_hub(hub: Hub, tmp_path: Path) -> None:
    done, _ = _kvplan(_env(tmp_path, hub.url), "import", "--hub", "acme/bad-header")
    assert done.returncode == 2
    assert done.stderr == (
        "kvplan: error: acme/bad-header@main/model.safetensors: not a safetensors file:"
        " w: dtype 'bf16' is not a safetensors dtype\n"
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
