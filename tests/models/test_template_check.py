"""Hostile model metadata: chat templates rendered within a time, output and memory bound
(``core/models/template_check.py``), and a GGUF's numbers checked against its tensors (``core/models/gguf_meta.py``),
each refused in one line before anything is converted or written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ark_trainer.base.errors import UserError
from tests.model_files import tiny_gguf

GOOD = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<|a|>{% endif %}"
HOSTILE = {
    "nested loops": (
        "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
        "did not render one short message within",
    ),
    "list grown in nested loops": (
        "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% for j in range(100000) %}"
        "{% set ns.l = ns.l + [1] %}{% endfor %}{% endfor %}",
        "did not render one short message within",
    ),
    "a 20 GB string": ("{{ 'x' * 20000000000 }}", "needs more than"),
    "a string doubled 40 times": (
        "{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
        "needs more than",
    ),
    "10 MB of output": (
        "{% for a in range(100000) %}{{ 'x' * 100 }}{% endfor %}",
        "as over 1000000 characters",
    ),
    "raise_exception": ("{{ raise_exception('no system role') }}", "raises on one short message"),
    "undefined call": ("{{ nothing() }}", "raises on one short message"),
    "forbidden attribute": ("{{ messages.__class__.__mro__ }}", "does what the sandbox forbids"),
    "forbidden subclasses": ("{{ ''.__class__.__subclasses__() }}", "does what the sandbox forbids"),
    "syntax": ("{% for %}", "is not valid Jinja"),
}


# the cases whose template never ends: refused by the time bound however short it is, so they wait 1 s; the
# others keep the real bound (a template that ends, or runs out of memory, costs only the time it takes: doubling a
# string to 1 GB took over 3 s on a loaded CI machine)
HANGS = {"nested loops", "list grown in nested loops", "hostile chat template"}


@pytest.fixture(autouse=True)
def short_bound(monkeypatch, request):
    from ark_trainer.core.models import template_check

    callspec = getattr(request.node, "callspec", None)
    hangs = callspec is not None and callspec.params.get("case") in HANGS
    if hangs:
        monkeypatch.setattr(template_check, "RENDER_SECONDS", 1.0)


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_template_is_one_line(case):
    from ark_trainer.core.models.template_check import check_chat_template

    template, words = HOSTILE[case]
    with pytest.raises(UserError) as err:
        check_chat_template(template, "where")
    [line] = err.value.messages
    assert line.startswith("where: the chat template ") and words in line, line


def test_a_sound_template_passes():
    from ark_trainer.core.models.template_check import check_chat_template

    check_chat_template(GOOD, "where", "<s>", "</s>")
    check_chat_template("{% generation %}{{ messages[0].content }}{% endgeneration %}", "where")


@pytest.fixture(scope="module")
def llama_gguf(tmp_path_factory) -> Path:
    return tiny_gguf(tmp_path_factory.mktemp("meta"), "llama")[1]


def rewrite(src: Path, dest: Path, **changes) -> Path:
    """A copy of the GGUF ``src`` with metadata keys changed (``key__dots`` for ``key.dots``; a list for
    an array keeps its element type)."""
    import gguf
    from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata

    reader = gguf.GGUFReader(src)
    new = {}
    for key, value in changes.items():
        name = key.replace("__", ".")
        old = reader.fields.get(name)
        if old is None:  # a key the file lacks: a whole number
            new[name] = MetadataDetails(gguf.GGUFValueType.UINT32, value)
            continue
        sub = old.types[-1] if old.types[0] == gguf.GGUFValueType.ARRAY else None
        new[name] = MetadataDetails(old.types[0], value, sub_type=sub)
    writer = gguf.GGUFWriter(str(dest), reader.fields["general.architecture"].contents())
    copy_with_new_metadata(reader, writer, new, [])
    return dest


def _tokens(src: Path) -> list[str]:
    import gguf

    return gguf.GGUFReader(src).fields["tokenizer.ggml.tokens"].contents()


BAD_META = {
    "head count 0": (lambda src: {"llama__attention__head_count": 0}, "llama.attention.head_count: 0 is outside"),
    "head count not dividing": (lambda src: {"llama__attention__head_count": 3}, "does not divide embedding_length"),
    "huge block count": (lambda src: {"llama__block_count": 2**31}, "llama.block_count: 2147483648 is outside"),
    "block count not the tensors'": (lambda src: {"llama__block_count": 7}, "but the tensors have 2 blocks"),
    "huge embedding length": (lambda src: {"llama__embedding_length": 2**31}, "is outside"),
    "embedding length not the tensors'": (lambda src: {"llama__embedding_length": 32}, "token_embd.weight is"),
    "token list cut short": (lambda src: {"tokenizer__ggml__tokens": _tokens(src)[:-5]}, "tokens, but token_embd"),
    "eos out of range": (lambda src: {"tokenizer__ggml__eos_token_id": 10**6}, "eos_token_id: 1000000 is not a token id"),
    "bos out of range": (lambda src: {"tokenizer__ggml__bos_token_id": 2**31}, "bos_token_id: 2147483648 is not"),
    "hostile chat template": (lambda src: {"tokenizer__chat_template": HOSTILE["nested loops"][0]}, "did not render"),
    "raising chat template": (lambda src: {"tokenizer__chat_template": "{{ raise_exception('x') }}"}, "raises on"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD_META))
def test_hostile_gguf_metadata_is_refused_before_conversion(llama_gguf, tmp_path, capsys, case):
    from ark_trainer.cli import main

    changes, words = BAD_META[case]
    path = rewrite(llama_gguf, tmp_path / "bad.gguf", **changes(llama_gguf))
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"question": f"q{i}", "label": "无"}) + "\n" for i in range(6)))
    out = tmp_path / "OUT"
    capsys.readouterr()  # the copy's progress bar
    code = main(["train", "--model_path", str(path), "--data_path", str(data), "--output_dir", str(out)])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and lines and "Traceback" not in err, err  # one line per problem
    assert all(line.startswith(f"error: --model_path: {path}") for line in lines), lines
    assert any(words in line for line in lines), lines
    assert not out.exists()


def test_a_folder_with_a_hostile_template_is_refused(tmp_path):
    from ark_trainer.core.models.structure import check_tokenizer_loads
    from tests.model_files import save_tiny

    folder = save_tiny(tmp_path / "m", "qwen2")
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["chat_template"] = HOSTILE["a 20 GB string"][0]
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    with pytest.raises(UserError) as err:
        check_tokenizer_loads(folder)
    assert "the chat template needs more than" in err.value.messages[0], err.value.messages


@pytest.mark.parametrize("case", ["nested loops", "raise_exception"])
def test_deploy_refuses_a_hostile_template_before_starting_a_server(tmp_path, capsys, case):
    from ark_trainer.cli import main
    from tests.model_files import save_tiny

    folder = save_tiny(tmp_path / "m", "qwen2")
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["chat_template"] = HOSTILE[case][0]
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    capsys.readouterr()  # the tiny model's progress bars
    assert main(["deploy", str(folder)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the chat template" in err[0] and HOSTILE[case][1] in err[0], err
    assert not list(tmp_path.glob("**/server.pid"))
