"""Every architecture kvplan reads answers for a Hub id as it does for the file: each fixture
config (tests/fixtures/hf/*/config.json: every bundled model and every architecture's example) is
served as a repository of a Hub on 127.0.0.1, and a Hub id of it gives the cache, the state and
the parameter count of the file itself; then offline (HF_HUB_OFFLINE=1), from the cache alone.

kvplan runs in one child process per pass, so it reads HF_ENDPOINT, HF_HOME and HF_HUB_OFFLINE
from its environment as it does for a user.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("huggingface_hub")

from hub_server import SHA, Hub, Repo, hub_env, json_blob, serve

FIXTURES = Path(__file__).parent / "fixtures" / "hf"
FOLDERS = sorted(p.parent.name for p in FIXTURES.glob("*/config.json"))
ORG = "kvplan-test"

# For each name: the figures of the Hub id and of the fixture file, from one process.
_CHILD = """
import json, sys
import kvplan
from kvplan.errors import KvplanError

def figures(name):
    try:
        spec = kvplan.load_model(name)
    except KvplanError as e:
        return {"refused": str(e).splitlines()[0]}
    return {
        "bytes_per_token": kvplan.bytes_per_token(spec, "bfloat16"),
        "state_bytes": kvplan.estimate(spec, 1, kv_dtype="bfloat16").state_bytes,
        "at_4k": kvplan.estimate(spec, 4096, kv_dtype="bfloat16").kv_cache_bytes,
        "num_parameters": spec.num_parameters,
        "layer_types": list(spec.layer_types or ()),
        "provenance": list(spec.provenance)[-1:],
    }

out = {}
for folder in json.loads(sys.argv[1]):
    out[folder] = {"hub": figures(sys.argv[2] + "/" + folder),
                   "file": figures(sys.argv[3] + "/" + folder + "/config.json")}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def hub() -> Iterator[Hub]:
    with serve() as server:
        for folder in FOLDERS:
            config = json.loads((FIXTURES / folder / "config.json").read_text())
            server.repos[f"{ORG}/{folder}"] = Repo({"config.json": json_blob(config)})
        yield server


def _figures(env: dict[str, str]) -> dict[str, dict[str, dict[str, object]]]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(FOLDERS), ORG, str(FIXTURES)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    figures: dict[str, dict[str, dict[str, object]]] = json.loads(done.stdout)
    return figures


def test_every_fixture_architecture_answers_alike_from_the_hub_and_offline(
    hub: Hub, tmp_path: Path
) -> None:
    assert len(FOLDERS) >= 250
    online = _figures(hub_env(tmp_path, hub.url))
    for folder, got in online.items():
        file, from_hub = got["file"], dict(got["hub"])
        assert "refused" not in file, (folder, file)
        assert str(from_hub.pop("provenance")).startswith(
            f"['read from the Hub: {ORG}/{folder} at {SHA}"
        ), folder
        assert from_hub == {k: v for k, v in file.items() if k != "provenance"}, folder
    asked = {r.path.split("/resolve/")[0] for r in hub.log if "/resolve/" in r.path}
    assert len(asked) == len(FOLDERS)  # each repository was read, once a process

    hub.log.clear()
    offline = _figures(hub_env(tmp_path, hub.url, HF_HUB_OFFLINE="1"))
    assert not hub.log  # not one request
    for folder, got in offline.items():
        again = {k: v for k, v in got["hub"].items() if k != "provenance"}
        first = {k: v for k, v in online[folder]["hub"].items() if k != "provenance"}
        assert again == first, folder
        assert str(got["hub"]["provenance"]).startswith("['read from the Hugging Face cache"), (
            folder
        )
