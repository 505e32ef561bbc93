"""``ark-trainer export`` checks the model folder it reads before it writes anything: a ``config.json`` edited
to hold text, negative, non-finite or inconsistent sizes, and a safetensors file cut short or with a header
that lies, are refused in one line naming the file and the field (they were tracebacks from ``int()``,
numpy or the safetensors reader)."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from tests.commands.refusals import refused
from tests.model_files import save_tiny

NAN, INF = float("nan"), float("inf")


@pytest.fixture
def folder(model, tmp_path) -> Path:
    return Path(shutil.copytree(model, tmp_path / "m"))


def export_refused(capsys, folder: Path, *expected: str) -> str:
    dest = folder.parent / "out" / "x.gguf"
    (line,) = refused(capsys, ["export", str(folder), "-o", str(dest)])
    assert all(text in line for text in expected), line
    assert not dest.parent.exists()  # nothing written, not even the folder
    return line


def edit_config(folder: Path, **changes) -> None:
    cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    (folder / "config.json").write_text(json.dumps({**cfg, **changes}), encoding="utf-8")


@pytest.mark.parametrize("value", ["4", -4, 0, 4.5, None, 1e308, NAN, INF, [4], True])
def test_a_head_count_that_is_not_a_size_is_refused(folder, capsys, value):
    edit_config(folder, num_attention_heads=value)
    export_refused(capsys, folder, str(folder / "config.json"), "num_attention_heads")


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"hidden_size": -64}, "hidden_size"),
        ({"hidden_size": 63}, "hidden_size: 63 does not split"),
        ({"num_key_value_heads": 3}, "num_key_value_heads: 3 does not divide"),
        ({"vocab_size": "many"}, "vocab_size"),
        ({"num_hidden_layers": 1e308}, "num_hidden_layers"),
        ({"intermediate_size": -INF}, "intermediate_size"),
        ({"max_position_embeddings": -1}, "max_position_embeddings"),
        ({"rms_norm_eps": NAN}, "rms_norm_eps"),
        ({"rope_theta": "big"}, "rope_theta"),
        ({"rope_parameters": {"rope_theta": -1}}, "rope_theta"),
        ({"tie_word_embeddings": "yes"}, "tie_word_embeddings"),
        ({"model_type": 7}, "model_type"),
    ],
)
def test_a_config_field_no_model_has_is_refused(folder, capsys, changes, field):
    edit_config(folder, **changes)
    export_refused(capsys, folder, str(folder / "config.json"), field)


def test_a_missing_size_is_refused(folder, capsys):
    cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    del cfg["num_hidden_layers"]
    (folder / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    export_refused(capsys, folder, "config.json", "no 'num_hidden_layers' field")


@pytest.mark.parametrize("text", ["[1, 2]", "[" * 10000 + "]" * 10000, '"qwen2"'])
def test_a_config_that_is_not_an_object_is_refused(folder, capsys, text):
    (folder / "config.json").write_text(text, encoding="utf-8")
    export_refused(capsys, folder, "config.json")


def _weights(folder: Path) -> Path:
    (path,) = folder.glob("*.safetensors")
    return path


@pytest.mark.parametrize("keep", [0.5, 0.999, 100, 4, 0])
def test_a_truncated_safetensors_file_is_refused(folder, capsys, keep):
    path = _weights(folder)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep) if keep < 1 else keep])
    export_refused(capsys, folder, str(path))


def _rewrite_header(path: Path, edit) -> None:
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    edit(header)
    raw = json.dumps(header).encode()  # the tensors' bytes stay: their offsets count from the header's end
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data[8 + n :])


def _first(header: dict) -> dict:
    return header[next(k for k in header if k != "__metadata__")]


@pytest.mark.parametrize(
    ("edit", "what"),
    [
        (lambda h: _first(h).update(data_offsets=[0, 10**12]), "run past"),
        (lambda h: _first(h).update(data_offsets=[-1, 4]), "data_offsets"),
        (lambda h: _first(h).update(dtype="F99"), "dtype"),
        (lambda h: _first(h).update(shape=[-1]), "shape"),
        (lambda h: _first(h).update(shape=[1, 1]), "do not hold"),
        (lambda h: h.update(extra="x"), "not an object"),
    ],
)
def test_a_safetensors_header_that_lies_is_refused(folder, capsys, edit, what):
    path = _weights(folder)
    _rewrite_header(path, edit)
    export_refused(capsys, folder, str(path), what)


def test_a_header_length_past_the_file_is_refused(folder, capsys):
    path = _weights(folder)
    data = path.read_bytes()
    path.write_bytes(struct.pack("<Q", len(data) * 2) + data[8:])
    export_refused(capsys, folder, str(path), "header length")


def test_llama_heads_the_weights_do_not_split_into_are_refused(tmp_path, capsys):
    folder = save_tiny(tmp_path / "llama", "llama")
    cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    edit_config(folder, num_attention_heads=cfg["hidden_size"], head_dim=1)
    capsys.readouterr()  # saving the model wrote its progress bar
    export_refused(capsys, folder, "q_proj", "does not split")
