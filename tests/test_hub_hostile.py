"""``--hub`` against a hostile Hub: every answer is bounded in time and size, never retried,
and ends in one line on stderr with the exit code of who must act.

The Hub is tests/hub_server.py's, with tricks in place of some answers. Deadlines are set to
1 s by HF_HUB_ETAG_TIMEOUT / HF_HUB_DOWNLOAD_TIMEOUT where a case waits for one (and to the
default 5 s once), so each case ends within a few seconds; the sizes are the real limits.
"""

from __future__ import annotations

import json
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hub_server import (
    CONFIG,
    NUM_PARAMETERS,
    SHA,
    TOKEN,
    Blob,
    Handler,
    Hub,
    Repo,
    Request,
    Trick,
    hub_env,
    json_blob,
    redirect,
    run_kvplan,
    safetensors,
    serve,
    silent,
    status,
    stream,
    tiny_llama,
    trickle,
)

pytest.importorskip("huggingface_hub")

FAST = {"HF_HUB_ETAG_TIMEOUT": "1", "HF_HUB_DOWNLOAD_TIMEOUT": "1"}
SHARD = "model-00001-of-00002.safetensors"
INDEX = "model.safetensors.index.json"
MiB = 2**20


@pytest.fixture(scope="module")
def hub() -> Iterator[Hub]:
    with serve() as server:
        yield server


def _add(hub: Hub, name: str, repo: Repo | None = None, **tricks: Trick) -> str:
    """Serve ``repo`` (the two-shard tiny llama by default) as ``evil/<name>``, with tricks
    keyed by file name (``api`` for the file list); returns the repo id."""
    repo = repo or tiny_llama()
    repo.tricks.update(tricks)
    hub.repos[f"evil/{name}"] = repo
    return f"evil/{name}"


def _import(
    hub: Hub, tmp_path: Path, repo_id: str, **env: str
) -> tuple[subprocess.CompletedProcess[str], float]:
    return run_kvplan(hub_env(tmp_path, hub.url, **env), "import", "--hub", repo_id)


def _one_line(done: subprocess.CompletedProcess[str], code: int, text: str) -> None:
    """Exit ``code`` and exactly one line on stderr holding ``text``: no traceback, no retry."""
    assert done.returncode == code, done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith("kvplan: error: "), done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.endswith("\n"), done.stderr
    assert "Traceback" not in done.stderr
    assert "Retrying" not in done.stderr
    assert text in done.stderr, done.stderr


def _logged(hub: Hub, repo_id: str, ending: str, wait_s: float = 5.0) -> list[Request]:
    """The requests for ``repo_id`` ending with ``ending``, once the server has logged one (a
    trick logs when kvplan has hung up)."""
    start = time.monotonic()
    while True:
        found = [r for r in hub.requests(ending) if f"/{repo_id}/" in r.path]
        if found or time.monotonic() - start > wait_s:
            return found
        time.sleep(0.02)


# -- 1. no retries ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("where", "code"),
    [("api", 500), ("config.json", 500), (INDEX, 503), (SHARD, 502), ("api", 429)],
)
def test_a_server_error_is_asked_once(hub: Hub, tmp_path: Path, where: str, code: int) -> None:
    repo_id = _add(hub, f"status-{code}-{where}", **{where: status(code)})
    done, elapsed_s = _import(hub, tmp_path, repo_id)
    _one_line(done, 3, f"--hub {repo_id}: the Hub answered HTTP {code}; try again later")
    assert elapsed_s < 5, elapsed_s
    ending = "/revision/main" if where == "api" else where
    assert len(_logged(hub, repo_id, ending)) == 1


# -- 2. a deadline for each whole request ------------------------------------------------------

_SLOW_STATUS_LINE = trickle(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
_SLOW_BODY = stream(b"{", every_s=0.5, length=1000)
_ENDLESS_SLOW = stream(b" " * 1024, every_s=0.05)


@pytest.mark.parametrize(
    ("where", "trick", "message"),
    [
        ("api", _SLOW_STATUS_LINE, "cannot reach"),
        ("api", silent(), "cannot reach"),
        ("config.json", _SLOW_BODY, "cannot read config.json from the Hub"),
        ("config.json", _ENDLESS_SLOW, "cannot read config.json from the Hub"),
        (INDEX, silent(), f"cannot read {INDEX} from the Hub"),
        (SHARD, _SLOW_STATUS_LINE, f"cannot read {SHARD} from the Hub"),
    ],
    ids=[
        "file list: the status line a byte every 0.5 s",
        "file list: silence",
        "config.json: the body a byte every 0.5 s",
        "config.json: 20 KiB/s without end",
        "index: silence",
        "a shard's header: a byte every 0.5 s",
    ],
)
def test_a_slow_server_is_cut_off_at_the_deadline(
    hub: Hub, tmp_path: Path, where: str, trick: Trick, message: str
) -> None:
    repo_id = _add(hub, f"slow-{len(hub.repos)}", **{where: trick})
    done, elapsed_s = _import(hub, tmp_path, repo_id, **FAST)
    _one_line(done, 3, message)
    assert "no complete answer within 1.0 s" in done.stderr
    assert elapsed_s < 5, elapsed_s


def test_the_default_deadline_is_5_s(hub: Hub, tmp_path: Path) -> None:
    repo_id = _add(hub, "silent-default", api=silent())
    done, elapsed_s = _import(hub, tmp_path, repo_id)
    _one_line(done, 3, "(no complete answer within 5.0 s), and it is not in the Hugging Face cache")
    assert 5 <= elapsed_s < 9, elapsed_s


# -- 3. and 4. a cap on every body ---------------------------------------------------------------

_ZEROS = b"\0" * 65536


@pytest.mark.parametrize("length", [400_000_000, None], ids=["Content-Length 400 MB", "endless"])
def test_an_oversized_file_list_is_refused(hub: Hub, tmp_path: Path, length: int | None) -> None:
    repo_id = _add(hub, f"big-list-{length}", api=stream(_ZEROS, length=length))
    done, elapsed_s = _import(hub, tmp_path, repo_id)
    _one_line(done, 3, "the Hub's file list is larger than 8 MiB, the most kvplan reads")
    assert elapsed_s < 5, elapsed_s
    (sent,) = _logged(hub, repo_id, "main")
    assert sent.num_bytes < 100_000_000  # 8 MiB and what the sockets buffer, not 400 MB


@pytest.mark.parametrize("where", ["config.json", INDEX])
@pytest.mark.parametrize("length", [400_000_000, None], ids=["Content-Length 400 MB", "endless"])
def test_an_oversized_file_is_refused_before_it_is_read(
    hub: Hub, tmp_path: Path, where: str, length: int | None
) -> None:
    repo_id = _add(hub, f"big-{where}-{length}", **{where: stream(_ZEROS, length=length)})
    done, elapsed_s = _import(hub, tmp_path, repo_id)
    _one_line(
        done, 2, f"{repo_id}@main/{where}: cannot read: larger than 64 MiB, the most kvplan reads"
    )
    assert elapsed_s < 8, elapsed_s
    (sent,) = _logged(hub, repo_id, where)
    assert sent.num_bytes < (64 if length else 100) * MiB  # what the sockets buffer, no more


# -- 5. a cap on the number of shards ----------------------------------------------------------


def _many_shards(num_shards: int) -> Repo:
    names = [f"model-{i:05d}-of-{num_shards:05d}.safetensors" for i in range(num_shards)]
    repo = Repo({"config.json": json_blob(CONFIG)})
    for i, name in enumerate(names):
        repo.files[name], _ = safetensors({f"t{i}": ["BF16", [4]]})
    weight_map = {f"t{i}": name for i, name in enumerate(names)}
    repo.files[INDEX] = json_blob({"metadata": {}, "weight_map": weight_map})
    return repo


@pytest.mark.parametrize("num_shards", [1025, 10_000])
def test_too_many_shards_are_refused_unread(hub: Hub, tmp_path: Path, num_shards: int) -> None:
    repo_id = _add(hub, f"shards-{num_shards}", _many_shards(num_shards))
    done, elapsed_s = _import(hub, tmp_path, repo_id)
    _one_line(
        done,
        2,
        f"{repo_id}@main/{INDEX}: weight_map: names {num_shards:,} files,"
        " more than the 1,024 kvplan reads",
    )
    assert _logged(hub, repo_id, ".safetensors", wait_s=0) == []
    assert elapsed_s < 5, elapsed_s


def test_the_most_shards_are_read(hub: Hub, tmp_path: Path) -> None:
    repo_id = _add(hub, "shards-1024", _many_shards(1024))
    done, elapsed_s = _import(hub, tmp_path, repo_id)
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout)["num_parameters"] == 1024 * 4
    assert len(_logged(hub, repo_id, ".safetensors")) == 1024  # one range request each
    assert elapsed_s < 20, elapsed_s


# -- 6. the timeout variables ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("HF_HUB_ETAG_TIMEOUT", "1e9"),
        ("HF_HUB_ETAG_TIMEOUT", "inf"),
        ("HF_HUB_ETAG_TIMEOUT", "nan"),
        ("HF_HUB_ETAG_TIMEOUT", "0"),
        ("HF_HUB_ETAG_TIMEOUT", ""),
        ("HF_HUB_DOWNLOAD_TIMEOUT", "61"),
        ("HF_HUB_DOWNLOAD_TIMEOUT", "2.5"),
        ("HF_HUB_DOWNLOAD_TIMEOUT", "-1"),
    ],
)
def test_a_timeout_setting_out_of_range_is_refused(
    hub: Hub, tmp_path: Path, name: str, value: str
) -> None:
    repo_id = _add(hub, f"timeout-{len(hub.repos)}")
    done, elapsed_s = _import(hub, tmp_path, repo_id, **{name: value})
    _one_line(done, 2, f"{name}: must be a whole number of seconds from 1 to 60, got {value!r}")
    assert _logged(hub, repo_id, "", wait_s=0) == []
    assert elapsed_s < 5, elapsed_s


def test_the_longest_timeout_setting_is_taken(hub: Hub, tmp_path: Path) -> None:
    done, _ = _import(hub, tmp_path, "acme/tiny-llama", HF_HUB_DOWNLOAD_TIMEOUT="60")
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout)["num_parameters"] == NUM_PARAMETERS


# -- 7. not found is bad input -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("api", "--hub evil/404-api: no model evil/404-api on the Hub"),
        ("config.json", "evil/404-config.json@main: config.json: not in this repository"),
        (INDEX, f"evil/404-{INDEX}@main: {INDEX}: not in this repository"),
        (SHARD, f"evil/404-{SHARD}@main: {SHARD}: not in this repository"),
    ],
)
def test_a_plain_404_is_not_found(hub: Hub, tmp_path: Path, where: str, message: str) -> None:
    repo_id = _add(hub, f"404-{where}", **{where: status(404)})  # no X-Error-Code
    done, _ = _import(hub, tmp_path, repo_id)
    _one_line(done, 2, message)


# -- 8. a hostile header: the same answer as from a folder -------------------------------------


def _file(header: Any, data_bytes: int = 4) -> bytes:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + b"\0" * data_bytes


def _entry(**changes: Any) -> dict[str, Any]:
    return {"w": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4], **changes}}


HOSTILE = {
    "dtype 'bf16'": (_file(_entry(dtype="bf16")), 2),
    "dtype a number": (_file(_entry(dtype=7)), 2),
    "shape of strings": (_file(_entry(shape=["2"])), 2),
    "shape of a float": (_file(_entry(shape=[2.5])), 2),
    "a negative size": (_file(_entry(shape=[-1])), 2),
    "17 dimensions": (_file(_entry(shape=[1] * 17)), 2),
    "an entry that is no object": (_file({"w": 3}), 2),
    "a list, not an object": (_file(b"[1, 2]"), 2),
    "not JSON": (_file(b"{nope"), 2),
    "not UTF-8": (_file(b'{"w\xff": 1}'), 2),
    "nested 100,000 deep (a second range)": (_file(b"[" * 100_000 + b"]" * 100_000), 2),
    "a header of 2**40 B": (struct.pack("<Q", 2**40) + b"{}", 2),
    "shorter than 8 bytes": (b"\x01\x02", 2),
    "an empty file": (b"", 2),
    "the file ends inside its header": (struct.pack("<Q", 1000) + b'{"w": ', 2),
    "no data_offsets": (_file({"w": {"dtype": "BF16", "shape": [2]}}), None),
}


@pytest.mark.parametrize(("content", "code"), HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_header_reads_as_from_a_folder(
    hub: Hub, tmp_path: Path, content: bytes, code: int | None
) -> None:
    from typer.testing import CliRunner

    from kvplan.cli import app

    folder = tmp_path / "local"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(CONFIG))
    (folder / "model.safetensors").write_bytes(content)
    local = CliRunner().invoke(app, ["import", str(folder)])
    repo = Repo(
        {"config.json": json_blob(CONFIG), "model.safetensors": Blob(content, len(content))}
    )
    repo_id = _add(hub, f"header-{len(hub.repos)}", repo)
    done, elapsed_s = _import(hub, tmp_path, repo_id)
    assert done.returncode == local.exit_code, (done.stderr, local.stderr)
    if code is not None:
        _one_line(done, code, f"{repo_id}@main/model.safetensors: not a safetensors file: ")
    if done.returncode:
        assert (
            done.stderr.split("model.safetensors: ", 1)[1]
            == (local.stderr.split("model.safetensors: ", 1)[1])
        )
    assert elapsed_s < 5, elapsed_s


def test_a_utf16_header_is_refused(hub: Hub, tmp_path: Path) -> None:
    content = _file(json.dumps(_entry()).encode("utf-16"))
    repo = Repo(
        {"config.json": json_blob(CONFIG), "model.safetensors": Blob(content, len(content))}
    )
    repo_id = _add(hub, "utf-16", repo)
    done, _ = _import(hub, tmp_path, repo_id)
    _one_line(done, 2, "model.safetensors: not a safetensors file: the header is not a JSON object")


# -- redirects and ranges, as the Hub's CDN answers them ---------------------------------------


def _to_cdn(repo_id: str, shard: str) -> Trick:
    def where(handler: Handler) -> str:  # another host name for the same server
        return f"http://localhost:{handler.server.server_address[1]}/cdn/{repo_id}/{shard}"

    return redirect(where)


def test_a_redirect_to_another_host_goes_without_the_token(hub: Hub, tmp_path: Path) -> None:
    repo = tiny_llama()
    repo_id = "evil/cdn"
    tricks = {shard: _to_cdn(repo_id, shard) for shard in repo.header_ends}
    _add(hub, "cdn", repo, **tricks)
    done, _ = _import(hub, tmp_path, repo_id, HF_TOKEN=TOKEN)
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout)["num_parameters"] == NUM_PARAMETERS
    for shard in repo.header_ends:
        (asked,) = [r for r in _logged(hub, repo_id, shard) if "/resolve/" in r.path]
        (moved,) = [r for r in _logged(hub, repo_id, shard) if r.path.startswith("/cdn/")]
        assert asked.authorization == f"Bearer {TOKEN}"
        assert (moved.authorization, moved.range) == (None, "bytes=0-99999")


def test_a_redirect_loop_ends_after_5(hub: Hub, tmp_path: Path) -> None:
    repo_id = "evil/loop"
    loop = redirect(lambda h: f"/{repo_id}/resolve/{SHA}/config.json", code=307)
    _add(hub, "loop", **{"config.json": loop})
    done, _ = _import(hub, tmp_path, repo_id)
    _one_line(done, 3, "cannot read config.json from the Hub (more than 5 redirects)")
    assert len(_logged(hub, repo_id, "config.json")) == 6


def _whole_file(blob: Blob) -> Trick:
    """The whole file, whatever range was asked for (HTTP 200)."""

    def trick(handler: Handler) -> int:
        handler.send_response(200)
        handler.send_header("Content-Length", str(blob.size))
        handler.end_headers()
        handler.wfile.write(blob.head)
        sent = len(blob.head)
        while sent < blob.size:
            handler.wfile.write(b"\0" * min(65536, blob.size - sent))
            sent += min(65536, blob.size - sent)
        return sent

    return trick


def test_a_server_that_ignores_the_range_is_read_only_as_far_as_the_header(
    hub: Hub, tmp_path: Path
) -> None:
    repo = tiny_llama()
    tricks = {shard: _whole_file(blob) for shard, blob in repo.files.items() if "-of-" in shard}
    repo_id = _add(hub, "no-ranges", repo, **tricks)
    done, elapsed_s = _import(hub, tmp_path, repo_id)
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout)["num_parameters"] == NUM_PARAMETERS
    for shard in tricks:  # kvplan hung up after the header: the write of 30 MB failed
        (sent,) = _logged(hub, repo_id, shard)
        assert sent.num_bytes == -1
    assert elapsed_s < 5, elapsed_s


def test_a_long_header_takes_a_second_range(hub: Hub, tmp_path: Path) -> None:
    norms = {f"model.extra.{i:05d}.weight_with_a_long_name": ["BF16", [8]] for i in range(3000)}
    repo = Repo({"config.json": json_blob(CONFIG)})
    repo.files["model.safetensors"], end = safetensors(norms)
    assert end > 100_000
    repo_id = _add(hub, "long-header", repo)
    done, _ = _import(hub, tmp_path, repo_id)
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout)["num_parameters"] == 3000 * 8
    ranges = [r.range for r in _logged(hub, repo_id, "model.safetensors")]
    assert ranges == ["bytes=0-99999", f"bytes=100000-{end - 1}"]


# -- the bounded request itself, in this process -----------------------------------------------


def test_a_request_ends_at_its_deadline_whatever_the_server_does(hub: Hub) -> None:
    from kvplan.importers.hub_http import RequestFailed, get

    repo_id = _add(hub, "in-process", **{"config.json": _SLOW_STATUS_LINE})
    url = f"{hub.url}/{repo_id}/resolve/main/config.json"
    start = time.monotonic()
    with pytest.raises(RequestFailed, match=r"no complete answer within 0\.5 s"):
        get(url, {}, timeout_s=0.5, deadline=start + 60, limit_bytes=10)
    assert time.monotonic() - start < 1.5
    start = time.monotonic()  # the deadline of all requests ends this one sooner
    with pytest.raises(RequestFailed, match=r"within 0\.2 s"):
        get(url, {}, timeout_s=5, deadline=start + 0.2, limit_bytes=10)
    assert time.monotonic() - start < 1.0


@pytest.mark.parametrize("truncate", [False, True])
def test_a_body_is_read_no_further_than_its_limit(hub: Hub, truncate: bool) -> None:
    from kvplan.importers.hub_http import BodyTooLarge, get

    repo_id = _add(hub, f"limit-{truncate}", **{"config.json": stream(b"x" * 1000)})
    url = f"{hub.url}/{repo_id}/resolve/main/config.json"
    deadline = time.monotonic() + 5
    if truncate:
        answer = get(url, {}, timeout_s=5, deadline=deadline, limit_bytes=2500, truncate=True)
        assert answer.body == b"x" * 2500
    else:
        with pytest.raises(BodyTooLarge):
            get(url, {}, timeout_s=5, deadline=deadline, limit_bytes=2500)


def test_all_headers_together_have_a_budget() -> None:
    from kvplan.errors import SpecError
    from kvplan.importers.hub import HEADERS_LIMIT_BYTES, _Budget

    budget = _Budget("acme/x@main")
    budget.take(HEADERS_LIMIT_BYTES - 1)
    budget.take(1)
    with pytest.raises(SpecError, match="more than 100 MiB in all"):
        budget.take(1)
