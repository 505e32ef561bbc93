"""The grader spec (``rewards/spec.py``): grader weights are finite and at most 1e6 (``1.0e+308`` twice made
every total NaN); ``1.0e308``, which YAML 1.1 reads as text, gets the same clear message; code graders are
checked for shape without running; grader kinds are registered by a decorator that refuses duplicates. A spec
file's problems name its file, line and field, all at once; the shipped presets parse.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ark_trainer.base.errors import UserError
from ark_trainer.rewards.composite import CompositeReward, default_preset, load_spec, preset_path
from tests.conftest import refused, train_argv
from tests.rewards.spec_files import grader_spec

TWO = (
    "  - name: a\n    type: string_check\n    reference: x\n    operation: like\n    weight: {w}\n"
    "  - name: b\n    type: string_check\n    reference: y\n    operation: like\n    weight: {w}\n"
)


@pytest.mark.parametrize(
    ("weight", "says"),
    [
        ("1.0e+308", "weight: expected a number in [0, 1e+06], got 1e+308"),
        ("1.0e308", "weight: expected a number in [0, 1e+06], got 1e+308"),  # text to YAML 1.1
        (".inf", "weight: expected a finite number, got inf"),
        (".nan", "weight: expected a finite number, got nan"),
        ("'lots'", "weight: expected an integer or a number, got 'lots'"),
    ],
)
def test_grader_weights_are_finite_and_bounded(assets, tmp_path, capsys, weight, says):
    spec = grader_spec(tmp_path, TWO.format(w=weight))
    lines = refused(capsys, ["score", "--reward_config", str(spec), "--data_path", str(assets["train"])])
    assert len(lines) == 2 and all(says in line for line in lines), lines
    assert lines[0].startswith(f"error: {spec}:6: weight")


def test_weights_written_as_yaml_text_still_count(tmp_path):
    from ark_trainer.rewards.spec import load_graders

    spec = grader_spec(tmp_path, TWO.format(w="1e3"))  # YAML 1.1 text, 1000 to a user
    assert [g.weight for g in load_graders(spec)] == [1000.0, 1000.0]


def test_multi_weights_and_reward_weights_are_bounded(assets, tmp_path, capsys):
    spec = grader_spec(
        tmp_path,
        "  - name: m\n    type: multi\n    weights: {a: 1.0e+308, b: 1}\n    graders:\n"
        "      a: {type: string_check, reference: x, operation: like}\n"
        "      b: {type: string_check, reference: y, operation: like}\n",
    )
    lines = refused(capsys, ["score", "--reward_config", str(spec), "--data_path", str(assets["train"])])
    assert "weights: a: expected a number in [0, 1e+06], got 1e+308" in lines[0]
    for bad in ("qc_verdict=1e308", "qc_verdict=nan", "qc_verdict=inf"):
        lines = refused(capsys, train_argv(assets, tmp_path / "out", "--reward_weights", bad))
        assert any("expected name=weight with a weight in [0, 1e+06]" in line for line in lines), lines


def test_a_plan_still_checks_code_graders_for_shape(tmp_path):
    from ark_trainer.rewards.spec import load_graders

    spec = tmp_path / "bad.yaml"
    spec.write_text(
        "graders:\n  - name: a\n    type: python\n    source: 'def grade(:'\n"
        "  - name: b\n    type: python\n    function: no_colon\n",
        encoding="utf-8",
    )
    with pytest.raises(UserError) as info:
        load_graders(spec, run_code=False)
    assert [m.split(": ")[1] for m in info.value.messages] == ["source", "function"]


def test_grader_kinds_are_registered_once_with_their_keys():
    import importlib

    from ark_trainer.rewards import spec

    for module in spec.KIND_MODULES:  # the episode graders (rewards/episode.py) register on first use
        importlib.import_module(module)
    assert list(spec.KINDS) == [
        *("rule", "string_check", "regex", "text_similarity", "reward_model", "llm_judge", "python", "multi"),
        *("tool_called", "no_invalid_calls", "max_turns", "env_reward", "answer_from_tool"),
    ]
    assert "pattern" in spec.KINDS["regex"].fields and "rubric" in spec.KINDS["llm_judge"].fields
    assert not hasattr(spec, "BUILDERS") and not hasattr(spec, "FIELDS")  # no parallel tables
    for taken in ("regex", "score_model"):  # a kind's name or an alias
        with pytest.raises(ValueError, match=f"{taken!r} is already registered"):
            spec.grader_kind(taken, {"x"})(lambda entry, name: None)
    assert spec.KINDS["regex"].build is spec._regex


def test_a_new_grader_kind_is_one_decorated_function(tmp_path):
    from ark_trainer.rewards import spec
    from ark_trainer.rewards.composite import CompositeReward

    @spec.grader_kind("test_length_is", {"chars"})
    def _length_is(entry, name):
        chars = int(entry.number("chars", 0, low=0, integer=True))
        return lambda prompts, completions, **kw: [float(len(c) == chars) for c in completions]

    try:
        path = tmp_path / "r.yaml"
        path.write_text("graders:\n  - name: two\n    type: test_length_is\n    chars: 2\n", encoding="utf-8")
        assert CompositeReward.from_spec(path)(["p", "p"], ["ab", "abc"]) == [1.0, 0.0]
        path.write_text("graders:\n  - name: two\n    type: test_length_is\n    size: 2\n", encoding="utf-8")
        with pytest.raises(
            UserError, match=r"r.yaml:4: size: unknown key for a test_length_is grader; use chars"
        ):
            CompositeReward.from_spec(path)
    finally:
        del spec.KINDS["test_length_is"]


def spec_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rewards.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_spec_loads_with_params(tmp_path):
    path = spec_file(
        tmp_path,
        "rewards:\n  - name: qc_verdict\n    weight: 1\n  - name: keywords\n    weight: 0.2\n"
        "    params: {required: ['抱歉']}\n",
    )
    specs = load_spec(path)
    assert [s.name for s in specs] == ["qc_verdict", "keywords"]
    assert specs[1].params == {"params": {"required": ["抱歉"]}} and specs[1].weight == 0.2
    assert specs[1].where == f"{path}:4" and specs[1].kind == "rule"
    comp = CompositeReward.from_spec(path)
    assert comp.names == ["qc_verdict", "keywords"]


def test_spec_bare_list(tmp_path):
    assert [s.name for s in load_spec(spec_file(tmp_path, "- name: qc_format\n"))] == ["qc_format"]


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        ("rewards:\n  - name: qc_verdict\n  - name: qc_format\n    wieght: 1\n", 4, "wieght"),
        ("rewards:\n  - name: qc_verdict\n    weight: -1\n", 3, "weight"),
        ("rewards:\n  - name: qc_verdict\n    weight: heavy\n", 3, "weight"),
        ("rewards:\n  - name: qc_verdict\n  - weight: 1\n", 3, "name"),
        ("rewards:\n  - name: keywords\n    params: [1, 2]\n", 3, "params"),
    ],
)
def test_spec_errors_name_file_line_and_field(tmp_path, text, line, field):
    path = spec_file(tmp_path, text)
    with pytest.raises(UserError) as exc:
        load_spec(path)
    assert exc.value.messages[0].startswith(f"{path}:{line}: {field}: ")


def test_spec_bad_yaml_names_line(tmp_path):
    path = spec_file(tmp_path, "rewards:\n  - name: qc_verdict\n    weight: [1\n")
    with pytest.raises(UserError) as exc:
        load_spec(path)
    assert exc.value.messages[0].startswith(f"{path}:") and "YAML" in exc.value.messages[0]


@pytest.mark.parametrize("text", ["", "rewards: []\n", "rewards: qc_verdict\n", "other: 1\n"])
def test_spec_empty_or_wrong_shape(tmp_path, text):
    path = spec_file(tmp_path, text)
    with pytest.raises(UserError) as exc:
        load_spec(path)
    assert exc.value.messages[0].startswith(f"{path}:1: graders: ")


def test_spec_all_problems_at_once(tmp_path):
    path = spec_file(
        tmp_path, "rewards:\n  - name: a\n    weight: -1\n  - nme: b\n  - name: c\n    extra: 1\n"
    )
    with pytest.raises(UserError) as exc:
        load_spec(path)
    where = [m.split(": ")[0] for m in exc.value.messages]
    assert where[:2] == [f"{path}:3", f"{path}:4"] and f"{path}:6" in where  # 5: no reward named c


def test_spec_unknown_reward_names_line(tmp_path):
    path = spec_file(tmp_path, "rewards:\n  - name: qc_verdict\n  - name: nope_reward\n")
    with pytest.raises(UserError) as exc:
        CompositeReward.from_spec(path)
    assert exc.value.messages[0].startswith(f"{path}:3: name: ") and "qc_verdict" in exc.value.messages[0]


def test_spec_missing_file(tmp_path):
    with pytest.raises(UserError, match="--reward_config"):
        load_spec(tmp_path / "nope.yaml")


@pytest.mark.parametrize("name", ["qc", "reference"])
def test_shipped_reward_presets_parse(name):
    comp = CompositeReward.from_spec(preset_path(name))
    assert comp.names and all(callable(c.fn) for c in comp.components)


@pytest.mark.parametrize(
    ("rows", "preset"),
    [
        ([{"label": "辱骂"}, {"label": "无"}], "qc"),
        ([{"label": "abuse"}], "qc"),
        ([{"label": "Paris"}], "reference"),
        ([{"reference": "Paris"}], "reference"),
        ([{"prompt": "x"}], "qc"),
        ([], "qc"),
        ([{"label": None}, {"reference": None}], "qc"),
    ],
)
def test_default_preset(rows, preset):
    assert default_preset(rows) == preset
