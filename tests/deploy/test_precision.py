"""The model is served in the precision its evaluation used (``services/deploy/precision.py``), recorded by ``train``."""

from __future__ import annotations

import pytest

from ark_trainer.services.deploy.precision import (
    PRECISION_FILE,
    dtype_of_precision,
    recorded_dtype,
    serving_dtype,
    write_precision,
)


def test_the_record_names_the_dtype_the_server_loads(tmp_path):
    import torch

    assert serving_dtype(tmp_path) == ("auto", f"no {PRECISION_FILE}: the weights' own dtype")
    write_precision(tmp_path, torch.bfloat16, "bf16 autocast, fp32 weights")
    assert recorded_dtype(tmp_path) == "bfloat16"
    dtype, why = serving_dtype(tmp_path)
    assert dtype == "bfloat16" and "evaluation" in why
    assert serving_dtype(tmp_path, "float32") == ("float32", "--dtype")  # the flag wins
    (tmp_path / PRECISION_FILE).write_text('{"dtype": "int4"}')
    assert serving_dtype(tmp_path)[0] == "auto"  # a dtype it does not know: the weights' own
    (tmp_path / PRECISION_FILE).write_text("{torn")
    assert serving_dtype(tmp_path)[0] == "auto"


@pytest.mark.parametrize(
    ("precision", "dtype"),
    [
        ("fp32", "float32"),
        ("bf16 autocast, fp32 weights", "bfloat16"),
        ("bf16 weights", "bfloat16"),
        ("fp16 autocast, fp32 weights", "float16"),
        (None, None),
    ],
)
def test_the_dtype_of_a_runs_precision(precision, dtype):
    from ark_trainer.core.models.device import Runtime

    assert dtype_of_precision(precision) == dtype
    if precision:  # the names are the runtime's own, and evaluation loads its dtype
        fp16, bf16 = precision.startswith("fp16"), precision.startswith("bf16")
        rt = Runtime("cpu", fp16, bf16, [], bf16_weights=precision == "bf16 weights")
        assert rt.precision == precision and str(rt.dtype) == f"torch.{dtype}"


def test_the_server_loads_the_recorded_dtype(tmp_path, monkeypatch, capsys):
    import torch
    import transformers.cli.serve as serve_cli
    import transformers.cli.serving.chat_completion as chat_completion
    import transformers.cli.serving.model_manager as model_manager
    import transformers.cli.serving.server as serving_server

    from ark_trainer.services.deploy import serve

    patched = (
        (chat_completion, "ChatCompletionHandler"),
        (serving_server, "build_server"),
        (model_manager.ModelManager, "__init__"),
    )  # main patches them in: each call starts from, and the test ends with, transformers' own
    originals = [(module, name, getattr(module, name)) for module, name in patched]

    def restore() -> None:
        for module, name, value in originals:
            monkeypatch.setattr(module, name, value)

    restore()
    started = []
    monkeypatch.setattr(serve_cli, "Serve", lambda **kwargs: started.append(kwargs))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ark-qc").mkdir()
    (tmp_path / "key").write_text("k\n")
    write_precision(tmp_path / "ark-qc", torch.bfloat16, "bf16 autocast, fp32 weights")
    argv = ["ark-qc", "--port", "1", "--window", "512", "--reply_tokens", "64", "--api_key_file", "key"]
    serve.main(argv)
    assert started[-1]["dtype"] == "bfloat16" and started[-1]["force_model"] == "ark-qc"
    assert "[ark serve] dtype bfloat16 (the precision its evaluation used" in capsys.readouterr().out
    restore()
    serve.main([*argv, "--dtype", "float32"])
    assert started[-1]["dtype"] == "float32"
