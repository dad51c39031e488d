"""A small Hugging Face Hub served on 127.0.0.1 for the ``--hub`` tests, and kvplan run against it.

The server answers what kvplan asks for: the model API (``/api/models/{repo}/revision/{rev}``),
``GET`` of ``/{repo}/resolve/{rev}/{file}`` with the ETag and X-Repo-Commit headers, and HTTP
range requests into safetensors files whose tensor data (tens of MB of zeros) is never stored.
A repository's ``tricks`` replace the answer to its file list (``"api"``) or to one of its files
with a hostile one: a status, a trickle, silence, an endless stream, a redirect. The server logs
every request, so the tests can show what was read and how often. kvplan runs in a child
process so that it reads HF_ENDPOINT, HF_HOME and HF_HUB_OFFLINE from its environment, as it
does for a user.
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

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
#: The longest a trick keeps a connection open: past any deadline of kvplan's.
_TRICK_S = 20.0


def layer(i: int, linear: str = "BF16") -> dict[str, list[Any]]:
    """The tensors of llama layer ``i``: name -> [dtype, shape]."""
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


_WIDTH = {"BF16": 2, "F32": 4, "U8": 1, "F8_E4M3": 1, "I32": 4}


@dataclass
class Blob:
    """A file on the served Hub: its leading bytes and its full size (the rest reads as zeros)."""

    head: bytes
    size: int

    def read(self, start: int, end: int) -> bytes:
        """Bytes ``start`` to ``end`` inclusive."""
        body = self.head[start : end + 1]
        return body + b"\0" * (end + 1 - start - len(body))


def safetensors(tensors: dict[str, list[Any]]) -> tuple[Blob, int]:
    """A safetensors file: 8-byte little-endian length, the JSON header, then the data; and
    where its header ends."""
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


def json_blob(data: Any) -> Blob:
    raw = json.dumps(data).encode()
    return Blob(raw, len(raw))


#: A hostile answer: it writes the whole response itself and returns the bytes it sent.
Trick = Callable[["Handler"], int]


@dataclass
class Repo:
    files: dict[str, Blob]
    header_ends: dict[str, int] = field(default_factory=dict)
    gated: bool = False
    tricks: dict[str, Trick] = field(default_factory=dict)


def sharded(names: list[str], parts: list[dict[str, list[Any]]]) -> Repo:
    """A checkpoint of config.json, the index and one safetensors file per part."""
    repo = Repo({"config.json": json_blob(CONFIG)})
    for shard, tensors in zip(names, parts, strict=True):
        repo.files[shard], repo.header_ends[shard] = safetensors(tensors)
    index = {
        "metadata": {"total_size": NUM_PARAMETERS * 2},
        "weight_map": {t: shard for shard, ts in zip(names, parts, strict=True) for t in ts},
    }
    repo.files["model.safetensors.index.json"] = json_blob(index)
    return repo


def tiny_llama() -> Repo:
    """The 2-layer llama in two shards (NUM_PARAMETERS)."""
    first = {"model.embed_tokens.weight": ["BF16", [32000, 1024]], **layer(0)}
    second = {
        **layer(1),
        "model.norm.weight": ["BF16", [1024]],
        "lm_head.weight": ["BF16", [32000, 1024]],
    }
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    return sharded(names, [first, second])


def _repos() -> dict[str, Repo]:
    single = {
        "model.embed_tokens.weight": ["BF16", [32000, 1024]],
        **layer(0, "F8_E4M3"),
        **layer(1, "F8_E4M3"),
        "model.norm.weight": ["BF16", [1024]],
        "lm_head.weight": ["BF16", [32000, 1024]],
    }
    fp8 = Repo({"config.json": json_blob({**CONFIG, "quantization_config": FP8})})
    fp8.files["model.safetensors"], fp8.header_ends["model.safetensors"] = safetensors(single)
    plain = tiny_llama()
    gated = Repo(dict(plain.files), dict(plain.header_ends), gated=True)
    bad = Repo({"config.json": json_blob(CONFIG)})
    bad.files["model.safetensors"], _ = safetensors({"w": ["BF16", [1024, 1024]]})
    bad.files["model.safetensors"].head = bad.files["model.safetensors"].head.replace(
        b'"BF16"', b'"bf16"'
    )

    def lora(base: str) -> Repo:  # a LoRA adapter: adapter_config.json, no config.json
        return Repo({"adapter_config.json": json_blob({"base_model_name_or_path": base, "r": 16})})

    return {
        "acme/tiny-lora": lora("acme/tiny-llama"),
        "acme/llama-lora": lora("meta-llama/Llama-3.1-8B-Instruct"),
        "acme/path-lora": lora("/home/user/secret-model"),
        "acme/lora-of-lora": lora("acme/tiny-lora"),
        "acme/tiny-llama": plain,
        "acme/tiny-llama-fp8": fp8,
        "acme/gated-llama": gated,
        "acme/bad-header": bad,
    }


@dataclass
class Request:
    method: str
    path: str
    range: str | None
    status: int  # 0 for a trick's answer
    num_bytes: int
    authorization: str | None


class Hub(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.repos = _repos()
        self.log: list[Request] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def requests(self, ending: str) -> list[Request]:
        """The logged requests whose path (without the query) ends with ``ending``."""
        return [r for r in self.log if urlsplit(r.path).path.endswith(ending)]


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
        elif len(parts) >= 4 and parts[0] == "cdn":  # where a trick redirects a file to
            repo = self.server.repos["/".join(parts[1:3])]
            self._send(200, repo.files["/".join(parts[3:])], body, {})
        else:
            self._send(404, Blob(b"", 0), body, {"X-Error-Code": "RepoNotFound"})

    def _trick(self, repo: Repo | None, key: str) -> bool:
        """Whether the repo answers ``key`` with a trick (which has then answered)."""
        trick = repo.tricks.get(key) if repo is not None else None
        if trick is None:
            return False
        self.close_connection = True
        try:
            sent = trick(self)
        except OSError:  # kvplan hung up, as it should
            sent = -1
        self._log(0, sent)
        return True

    def _log(self, status: int, num_bytes: int) -> None:
        auth = self.headers.get("Authorization")
        entry = Request(self.command, self.path, self.headers.get("Range"), status, num_bytes, auth)
        self.server.log.append(entry)

    def _model_info(self, repo_id: str, revision: str, body: bool) -> None:
        repo = self.server.repos.get(repo_id)
        if self._trick(repo, "api"):
            return
        if repo is None:
            self._send(
                404,
                json_blob({"error": "Repository not found"}),
                body,
                {"X-Error-Code": "RepoNotFound"},
            )
        elif revision not in ("main", SHA):
            self._send(
                404,
                json_blob({"error": "Revision not found"}),
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
            self._send(200, json_blob(info), body, {})

    def _resolve(self, repo_id: str, revision: str, filename: str, body: bool) -> None:
        repo = self.server.repos.get(repo_id)
        auth = self.headers.get("Authorization")
        if self._trick(repo, filename):
            return
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
        self._log(code, len(data))
        self.send_response(code)
        for key, value in {**headers, "Accept-Ranges": "bytes"}.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(end - start + 1 if blob.size else 0))
        self.end_headers()
        if data:
            self.wfile.write(data)


# -- tricks: hostile answers --------------------------------------------------------------------


def status(code: int, headers: dict[str, str] | None = None) -> Trick:
    """An empty answer with ``code``, and no X-Error-Code unless given (as mirrors answer)."""

    def trick(handler: Handler) -> int:
        handler.send_response(code)
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", "0")
        handler.end_headers()
        return 0

    return trick


def trickle(raw: bytes, every_s: float = 0.5) -> Trick:
    """``raw`` (status line, headers and body as bytes) one byte every ``every_s`` seconds."""

    def trick(handler: Handler) -> int:
        start = time.monotonic()
        for i in range(len(raw)):
            if time.monotonic() - start > _TRICK_S:
                return i
            handler.wfile.write(raw[i : i + 1])
            handler.wfile.flush()
            time.sleep(every_s)
        return len(raw)

    return trick


def silent(seconds: float = _TRICK_S) -> Trick:
    """Nothing at all, for ``seconds``."""

    def trick(handler: Handler) -> int:
        time.sleep(seconds)
        return 0

    return trick


def stream(
    chunk: bytes, every_s: float = 0.0, length: int | None = None, limit_bytes: int = 2**31
) -> Trick:
    """200, then ``chunk`` after ``chunk`` every ``every_s`` seconds, until kvplan hangs up (or
    ``limit_bytes`` or ``_TRICK_S``); ``length`` the Content-Length it claims (None: none, the
    body ends when the connection does)."""

    def trick(handler: Handler) -> int:
        handler.send_response(200)
        if length is not None:
            handler.send_header("Content-Length", str(length))
        handler.send_header("Connection", "close")
        handler.end_headers()
        sent, start = 0, time.monotonic()
        while sent < limit_bytes and time.monotonic() - start < _TRICK_S:
            try:
                handler.wfile.write(chunk)
                handler.wfile.flush()
            except OSError:
                break
            sent += len(chunk)
            if every_s:
                time.sleep(every_s)
        return sent

    return trick


def redirect(location: Callable[[Handler], str], code: int = 302) -> Trick:
    """A redirect to ``location(handler)``."""

    def trick(handler: Handler) -> int:
        handler.send_response(code)
        handler.send_header("Location", location(handler))
        handler.send_header("Content-Length", "0")
        handler.end_headers()
        return 0

    return trick


@contextmanager
def serve() -> Iterator[Hub]:
    server = Hub()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


# -- kvplan in a child process ------------------------------------------------------------------


def hub_env(tmp_path: Path, endpoint: str, **extra: str) -> dict[str, str]:
    """A clean environment: the Hugging Face cache under ``tmp_path``, ``endpoint`` the Hub."""
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


def run_kvplan(env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """kvplan's answer and its wall time in seconds."""
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "kvplan", *args], capture_output=True, text=True, env=env, timeout=60
    )
    return done, time.monotonic() - start


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
