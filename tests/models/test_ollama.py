"""Ollama stores whose manifests point outside ``blobs/``, or whose text layers are not small regular files:
refused in one line before anything is written or copied (``core/models/ollama.py``)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from ark_trainer.cli import main
from tests.model_files import ollama_store

SECRET = b"API_KEY=do-not-copy\n"


def _store(tmp_path: Path, monkeypatch) -> Path:
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"GGUF" + b"\0" * 60)  # refused before the model layer is inspected
    store = ollama_store(tmp_path / "store", fake, template="{{ .Prompt }}")
    monkeypatch.setenv("OLLAMA_MODELS", str(store))
    return store


def _manifest(store: Path) -> Path:
    return store / "manifests" / "registry.ollama.ai" / "library" / "tiny" / "latest"


def _set_layer(store: Path, kind: str, digest: str) -> None:
    path = _manifest(store)
    data = json.loads(path.read_text())
    for layer in data["layers"]:
        if layer["mediaType"].endswith("." + kind):
            layer["digest"] = digest
    path.write_text(json.dumps(data))


def _secret(store: Path) -> Path:
    secret = store.parent / "secret.env"
    secret.write_bytes(SECRET)
    secret.chmod(0o600)
    return secret


def _absolute(store: Path) -> None:
    _set_layer(store, "template", str(_secret(store)))


def _climbing(store: Path) -> None:
    _secret(store)
    _set_layer(store, "template", "sha256:../../secret.env")


def _climbing_params(store: Path) -> None:
    _secret(store)
    _set_layer(store, "params", "../secret.env")


def _upper_hex(store: Path) -> None:
    _set_layer(store, "template", "sha256:" + "A" * 64)


def _linked_blob(store: Path) -> None:
    """A digest of the right form whose blob is a link to a file outside the store."""
    digest = hashlib.sha256(SECRET).hexdigest()
    (store / "blobs" / f"sha256-{digest}").symlink_to(_secret(store))
    _set_layer(store, "template", f"sha256:{digest}")


def _text_blob(store: Path, make) -> None:
    digest = "ab" * 32
    make(store / "blobs" / f"sha256-{digest}")
    _set_layer(store, "template", f"sha256:{digest}")


def _fifo(store: Path) -> None:
    _text_blob(store, os.mkfifo)


def _sparse(store: Path) -> None:
    def make(path: Path) -> None:
        with path.open("wb") as fh:
            fh.truncate(3 << 30)  # 3 GB of nothing, on disk as a few bytes

    _text_blob(store, make)


def _wrong_hash(store: Path) -> None:
    _text_blob(store, lambda path: path.write_text("{{ .Prompt }} changed"))


BAD = {
    "absolute path": (_absolute, "template layer digest"),
    "climbs out of blobs": (_climbing, "is not sha256:<64 hex>"),
    "params climbs out": (_climbing_params, "params layer digest"),
    "upper-case hex": (_upper_hex, "is not sha256:<64 hex>"),
    "blob linked outside": (_linked_blob, "links outside"),
    "text layer is a FIFO": (_fifo, "named pipe (FIFO), not a regular file"),
    "sparse text layer": (_sparse, "an Ollama template layer is at most"),
    "text layer checksum": (_wrong_hash, "does not hash to its name"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_layers_are_refused_and_nothing_is_copied(tmp_path, monkeypatch, capsys, case):
    from ark_trainer.cli import main

    store = _store(tmp_path, monkeypatch)
    spoil, words = BAD[case]
    spoil(store)
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"question": f"q{i}", "label": "无"}) + "\n" for i in range(6)))
    out = tmp_path / "OUT"
    code = main(["train", "--model_path", "ollama:tiny", "--data_path", str(data), "--output_dir", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("error: --model_path: ollama:tiny") and words in err[0], err[0]
    assert not out.exists()


def test_a_manifest_that_is_a_fifo_does_not_hang(tmp_path, monkeypatch):
    from ark_trainer.base.errors import UserError
    from ark_trainer.core.models.ollama import find_model

    store = _store(tmp_path, monkeypatch)
    _manifest(store).unlink()
    os.mkfifo(_manifest(store))
    with pytest.raises(UserError, match="no manifest"):
        find_model("ollama:tiny", store=store)


@pytest.mark.parametrize(
    "manifest", ["[" * 100_000 + "]" * 100_000, '{"layers": ' + "[" * 50_000 + "]" * 50_000 + "}"]
)
def test_an_ollama_manifest_nested_too_deep_is_one_line(assets, tmp_path, capsys, monkeypatch, manifest):
    store = tmp_path / "ollama"
    path = store / "manifests" / "registry.ollama.ai" / "library" / "tiny" / "latest"
    path.parent.mkdir(parents=True)
    path.write_text(manifest)
    monkeypatch.setenv("OLLAMA_MODELS", str(store))
    argv = ["train", "--model_path", "ollama:tiny", "--data_path", str(assets["train"])]
    assert main([*argv, "--output_dir", str(tmp_path / "out"), "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"manifest {path} is not valid JSON" in lines[0], err
    assert "Traceback" not in err and not (tmp_path / "out").exists()
