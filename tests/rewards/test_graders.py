"""The grader spec: every grader type with a good and a bad spec, templates, metrics, multi formulas."""

from __future__ import annotations

import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import read_jsonl
from ark_trainer.cli import main
from ark_trainer.rewards import similarity
from ark_trainer.rewards.composite import CompositeReward, load_spec, preset_path
from ark_trainer.rewards.graders import Template, contexts
from ark_trainer.rewards.qc import format_answer
from ark_trainer.stages.registry import config_class
from tests.conftest import refused, save_tiny_qwen
from tests.rewards.attacks import CATASTROPHIC, regex_yaml, score, unlabelled_data
from tests.rewards.spec_files import grader_spec

GOOD = format_answer("辱骂", "非常抱歉给您带来不便，我们会尽快为您处理。")
BAD = format_answer("无", "不归我管，你打13812345678问问")


def spec(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "rewards.yaml"
    path.write_text("graders:\n" + textwrap.indent(textwrap.dedent(body), "  "), encoding="utf-8")
    return path


def scores(path: Path, completions: list[str], **columns) -> dict[str, list]:
    comp = CompositeReward.from_spec(path)
    return comp.score(["问题"] * len(completions), completions, **columns)


def user_error(path: Path) -> list[str]:
    with pytest.raises(UserError) as exc:
        CompositeReward.from_spec(path)
    return exc.value.messages


# --- one good and one bad spec per grader type ---


def test_rule_good_and_bad(tmp_path):
    path = spec(tmp_path, "- name: verdict\n  type: rule\n  rule: qc_verdict\n- name: qc_format\n")
    table = scores(path, [GOOD, BAD], label=["辱骂", "辱骂"])
    assert table["verdict"] == [1.0, 0.0] and table["qc_format"] == [1.0, 1.0]
    bad = spec(tmp_path, "- name: verdict\n  type: rule\n  rule: qc_verdicts\n")
    assert user_error(bad)[0].startswith(f"{bad}:4: rule: unknown reward 'qc_verdicts'")


def test_a_renamed_rule_leaves_the_registry_alone(tmp_path):
    from ark_trainer.rewards.qc import qc_verdict

    comp = CompositeReward.from_spec(spec(tmp_path, "- name: verdict\n  rule: qc_verdict\n"))
    assert comp.trl_reward_funcs()[0][1].__name__ == "verdict" and qc_verdict.__name__ == "qc_verdict"


def test_string_check_good_and_bad(tmp_path):
    path = spec(
        tmp_path,
        """\
        - name: apologises
          type: string_check
          input: "{{sample.output_text}}"
          reference: "抱歉"
          operation: like
        - name: label_is
          type: string_check
          input: "{{item.label}}"
          reference: "辱骂"
          operation: eq
        """,
    )
    table = scores(path, [GOOD, BAD], label=["辱骂", None])
    assert table["apologises"] == [1.0, 0.0]
    assert table["label_is"] == [1.0, None]  # a missing column: not applicable, not 0
    bad = spec(tmp_path, "- name: s\n  type: string_check\n  reference: x\n  operation: contains\n")
    assert user_error(bad)[0].startswith(
        f"{bad}:5: operation: unknown value 'contains'; use one of eq, ne, like"
    )


def test_regex_good_and_bad(tmp_path):
    path = spec(
        tmp_path, '- name: no_phone\n  type: regex\n  pattern: "1[3-9]\\\\d{9}"\n  expect: no_match\n'
    )
    assert scores(path, [GOOD, BAD])["no_phone"] == [1.0, 0.0]
    bad = spec(tmp_path, '- name: r\n  type: regex\n  pattern: "(unclosed"\n')
    assert user_error(bad)[0].startswith(f"{bad}:4: pattern: not a valid regular expression")


def test_text_similarity_good_and_bad(tmp_path):
    path = spec(
        tmp_path,
        """\
        - name: sim
          type: text_similarity
          reference: "{{item.reference}}"
          evaluation_metric: fuzzy_match
        - name: passes
          type: text_similarity
          reference: "{{item.reference}}"
          evaluation_metric: token_f1
          pass_threshold: 0.5
        """,
    )
    table = scores(path, ["the cat sat", "a dog ran"], reference=["the cat sat", "the cat sat"])
    assert table["sim"][0] == 1.0 and 0 < table["sim"][1] < 0.7
    assert table["passes"] == [1.0, 0.0]
    bad = spec(tmp_path, "- name: t\n  type: text_similarity\n  reference: x\n  evaluation_metric: cosine\n")
    assert user_error(bad)[0].startswith(f"{bad}:5: evaluation_metric: 'cosine' needs a downloaded model")


def test_reward_model_good_and_bad(tmp_path):
    rm = save_tiny_qwen(tmp_path / "rm", "Qwen2ForSequenceClassification", num_labels=1)
    path = spec(tmp_path, f"- name: rm\n  type: reward_model\n  model_path: {rm}\n  device: cpu\n")
    values = scores(path, [GOOD, BAD])["rm"]
    assert all(0 < v < 1 for v in values)
    lm = save_tiny_qwen(tmp_path / "lm")
    bad = spec(tmp_path, f"- name: rm\n  type: reward_model\n  model_path: {lm}\n")
    message = user_error(bad)[0]
    assert message.startswith(f"{bad}:4: model_path: ") and "not a sequence-classification" in message


def test_python_function_and_source_good_and_bad(tmp_path, monkeypatch):
    (tmp_path / "my_graders.py").write_text(
        "def grade(sample, item):\n    return 1.0 if item.get('label') in sample['output_text'] else 0.0\n"
        "def wrong(sample):\n    return 1.0\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    path = spec(
        tmp_path,
        """\
        - name: has_label
          type: python
          function: my_graders:grade
        - name: short
          type: python
          source: |
            def grade(sample, item):
                return 1.0 if len(sample["output_text"]) < 40 else 0.0
        """,
    )
    table = scores(path, [GOOD, BAD], label=["辱骂", "辱骂"])
    assert table["has_label"] == [1.0, 0.0] and table["short"] == [1.0, 1.0]
    for body, line, field in [
        ("- name: p\n  type: python\n  function: my_graders:wrong\n", 4, "function"),
        ("- name: p\n  type: python\n  function: no_such_module_x:grade\n", 4, "function"),
        ("- name: p\n  type: python\n  source: 'x = 1'\n", 4, "source"),
        ("- name: p\n  type: python\n", 2, "function"),
    ]:
        bad = spec(tmp_path, body)
        assert user_error(bad)[0].startswith(f"{bad}:{line}: {field}: "), body
    sys.modules.pop("my_graders", None)


def test_python_grader_returning_junk_is_a_user_error(tmp_path):
    path = spec(
        tmp_path, "- name: p\n  type: python\n  source: |\n    def grade(sample, item):\n      return 'x'\n"
    )
    with pytest.raises(UserError, match="returned 'x'"):
        scores(path, [GOOD])


def test_multi_formula_and_weights_good_and_bad(tmp_path):
    path = spec(
        tmp_path,
        """\
        - name: combo
          type: multi
          graders:
            apology: {type: string_check, reference: "抱歉", operation: like}
            no_phone: {type: regex, pattern: "1[3-9]\\\\d{9}", expect: no_match}
          calculate_output: "0.25 * apology + 0.75 * no_phone"
        - name: mean
          type: multi
          graders:
            apology: {type: string_check, reference: "抱歉", operation: like}
            label: {type: string_check, input: "{{item.label}}", reference: "辱骂", operation: eq}
          weights: {apology: 1, label: 3}
        """,
    )
    table = scores(path, [GOOD, BAD], label=[None, "辱骂"])
    assert table["combo"] == [1.0, 0.0]
    assert table["mean"] == [1.0, 0.75]  # the None sub-score is left out of the weighted mean
    for body, line, field in [
        (
            "- name: m\n  type: multi\n  graders:\n    a: {type: regex, pattern: x}\n"
            "  calculate_output: 'a + b'\n",
            6,
            "calculate_output",
        ),
        (
            "- name: m\n  type: multi\n  graders:\n    a: {type: regex, pattern: x}\n"
            "  calculate_output: '__import__(1)'\n",
            6,
            "calculate_output",
        ),
        ("- name: m\n  type: multi\n  graders:\n    a: {type: regex}\n", 5, "graders.a.pattern"),
        (
            "- name: m\n  type: multi\n  graders:\n    a: {type: regex, pattern: x}\n"
            "  calculate_output: 'max(a)'\n",
            6,
            "calculate_output",
        ),
        (
            "- name: m\n  type: multi\n  graders:\n    a: {type: regex, pattern: x}\n  weights: {b: 1}\n",
            6,
            "weights",
        ),
    ]:
        bad = spec(tmp_path, body)
        assert user_error(bad)[0].startswith(f"{bad}:{line}: {field}: "), (body, user_error(bad))


def test_llm_judge_bad_specs(tmp_path):
    # (the good llm_judge spec runs against a local server in test_llm_judge.py)
    for body, line, field in [
        ("- name: j\n  type: llm_judge\n  base_url: http://x/v1\n  rubric: r\n", 2, "model"),
        ("- name: j\n  type: llm_judge\n  model: m\n  base_url: x.com\n  rubric: r\n", 5, "base_url"),
        ("- name: j\n  type: llm_judge\n  model: m\n  base_url: http://x/v1\n", 2, "rubric"),
        (
            "- name: j\n  type: llm_judge\n  model: m\n  base_url: http://x/v1\n  rubric: r\n  range: [5, 1]\n",
            7,
            "range",
        ),
        (
            "- name: j\n  type: score_model\n  model: m\n  base_url: http://x/v1\n  rubric: '{{item}}'\n",
            6,
            "rubric",
        ),
        (
            "- name: j\n  type: llm_judge\n  model: m\n  base_url: http://x/v1\n  rubric: r\n  timeout: -1\n",
            7,
            "timeout",
        ),
    ]:
        bad = spec(tmp_path, body)
        assert user_error(bad)[0].startswith(f"{bad}:{line}: {field}: "), (body, user_error(bad))


# --- the spec as a whole ---


def test_every_problem_is_reported_at_once(tmp_path):
    path = spec(
        tmp_path,
        """\
        - name: a
          type: string_chek
        - name: a2
          type: regex
          pattern: x
          patern: y
        - name: a2
          type: regex
          pattern: x
        - name: total
        """,
    )
    messages = user_error(path)
    assert [m.split(": ")[1] for m in messages] == ["type", "patern", "name", "name"]
    assert messages[0].startswith(f"{path}:3: type: unknown grader type 'string_chek'")
    assert "already used" in messages[2]


def test_unknown_top_level_key(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("graders:\n  - name: qc_format\ngrader_defaults: {}\n", encoding="utf-8")
    assert user_error(path)[0].startswith(f"{path}:3: grader_defaults: unknown key")


def test_shipped_qc_preset_is_the_new_format():
    specs = load_spec(preset_path("qc"))
    assert [(s.name, s.kind) for s in specs] == [
        ("qc_verdict", "rule"),
        ("qc_compliance", "rule"),
        ("qc_satisfaction", "rule"),
        ("qc_format", "rule"),
        ("qc_type", "rule"),
    ]
    assert [s.weight for s in specs][-1] == 0.0  # reported, and GRPO's own reward on a real model
    assert "graders:" in preset_path("qc").read_text(encoding="utf-8")


# --- templates and metrics ---


def test_templates():
    t = Template.parse("label={{item.label}} meta={{ item.meta.lang }} out={{sample.output_text}}")
    sample, item = {"output_text": "hi"}, {"label": "辱骂", "meta": {"lang": "zh"}}
    assert t.render(sample, item) == "label=辱骂 meta=zh out=hi"
    assert t.render(sample, {"label": "x"}) is None
    assert Template.parse("{{item.n}}").render(sample, {"n": 3}) == "3"
    for text in ("{{sample.output_json}}", "{{prompt}}", "{{item.}}", "{{item.x"):
        with pytest.raises(ValueError):
            Template.parse(text)


def test_contexts_skip_trl_kwargs_and_add_prompt():
    ctx = contexts(
        [[{"role": "user", "content": "q"}]],
        ["a"],
        {"label": ["x"], "trainer_state": None, "completion_ids": [[1]]},
    )
    assert ctx == [({"output_text": "a"}, {"label": "x", "prompt": "q"})]


@pytest.mark.parametrize("metric", sorted(similarity.METRICS))
def test_metrics_are_one_on_equal_and_lower_on_different(metric):
    fn = similarity.METRICS[metric]
    ref = "非常抱歉给您带来不便，我们会尽快为您处理这个订单的问题。"
    assert fn(ref, ref) == pytest.approx(1.0)
    assert 0.0 <= fn("不归我管", ref) < 0.5
    assert fn("非常抱歉，我们会尽快处理", ref) > fn("不归我管", ref)


def test_token_f1_and_rouge_l_values():
    assert similarity.token_f1("a b c d", "a b x y") == pytest.approx(0.5)
    assert similarity.rouge_l("a b c d", "a c d") == pytest.approx(2 * (3 / 4) * 1 / (3 / 4 + 1))
    assert similarity.tokens("Hello, 世界") == ["hello", ",", "世", "界"]


def test_two_graders_may_not_share_a_name():
    from ark_trainer.rewards.composite import Component

    with pytest.raises(UserError, match="'reward_model' is the name of two graders"):
        CompositeReward([Component("reward_model", len, 1.0), Component("reward_model", len, 1.0)])


def test_a_regex_timeout_is_bounded(assets, tmp_path, capsys):
    spec = tmp_path / "regex.yaml"
    spec.write_text(
        "graders:\n  - name: r\n    type: regex\n    pattern: 'a+'\n    timeout: 1e300\n", encoding="utf-8"
    )
    lines = refused(capsys, ["score", "--reward_config", str(spec), "--data_path", str(assets["train"])])
    assert lines == [f"error: {spec}:5: timeout: expected a number in [0.001, 3600], got 1e+300"], lines


@pytest.mark.parametrize(
    "formula",
    ["-" * 50_000 + "a", "a+" * 30_000 + "a", "a**" * 2_000 + "a", "min(a, " * 120 + "a" + ")" * 120],
)
def test_a_formula_too_long_or_too_deep_is_one_line_naming_the_grader(assets, tmp_path, capsys, formula):
    spec = tmp_path / "multi.yaml"
    spec.write_text(
        "graders:\n  - name: m\n    type: multi\n    graders:\n"
        "      a: {type: string_check, reference: x, operation: like}\n"
        f"    calculate_output: '{formula}'\n",
        encoding="utf-8",
    )
    lines = refused(capsys, ["score", "--reward_config", str(spec), "--data_path", str(assets["train"])])
    assert len(lines) == 1 and lines[0].startswith(f"error: {spec}:6: calculate_output: "), lines
    assert "too long" in lines[0] or "nests" in lines[0], lines


def test_a_complex_formula_names_the_grader_and_its_line(assets, tmp_path, capsys):
    spec = grader_spec(
        tmp_path,
        "  - name: qc_verdict\n  - name: combined\n    type: multi\n"
        "    calculate_output: '(a - 2) ** 0.5'\n    graders:\n"
        "      a: {type: string_check, reference: 结论, operation: like}\n",
    )
    from ark_trainer.rewards.composite import CompositeReward

    reward = CompositeReward.from_spec(spec)
    scores = reward.score(["q", "q"], ["结论：违规", "no"], label=["无", "无"])
    assert scores["combined"] == [None, None]
    multi = reward.components[1].fn
    assert multi.failed == 2 and multi.failure.startswith(
        f"{spec}:5: multi grader 'combined': calculate_output"
    )
    assert main(["score", "--reward_config", str(spec), "--data_path", str(assets["train"])]) == 0
    out = capsys.readouterr()
    assert f"{spec}:5: multi grader 'combined'" in out.out + out.err


@pytest.mark.slow
def test_score_bounds_a_catastrophic_regex(tmp_path, capsys):
    data = unlabelled_data(tmp_path, n=1, candidates=[CATASTROPHIC, "aaa"])
    started = time.time()
    code, out, _ = score(regex_yaml(tmp_path), data, capsys)
    assert code == 0 and time.time() - started < 20
    warning = [line for line in out.splitlines() if "'ends_in_a'" in line and "not graded" in line]
    assert len(warning) == 1 and "took over 1s" in warning[0], out
    assert "1/2" in next(line for line in out.splitlines() if line.startswith("ends_in_a"))


@pytest.mark.slow
def test_the_train_reward_bounds_a_catastrophic_regex_and_the_heartbeat_runs_on(tmp_path):
    from ark_trainer.core.runtime.monitor import Monitor
    from ark_trainer.rewards.builder import build_reward
    from ark_trainer.rewards.guards import attach_monitor

    cfg = config_class()(reward_config=str(regex_yaml(tmp_path)), reward_timeout=60.0)
    reward = build_reward(cfg, [], "cpu")
    attach_monitor(reward, Monitor(tmp_path, heartbeat=False))
    ticks, stop = [], threading.Event()
    ticker = threading.Thread(
        target=lambda: [ticks.append(1) or time.sleep(0.05) for _ in iter(stop.is_set, True)]
    )
    ticker.start()
    started = time.time()
    table = reward.score(["p", "p"], [CATASTROPHIC, "aaa"])
    elapsed = time.time() - started
    stop.set()
    ticker.join()
    assert elapsed < 20 and table["ends_in_a"] == [None, 1.0] and table["total"][0] is not None
    assert len(ticks) >= 10  # the interpreter was not held: another thread ran all along
    (event,) = [e for e in read_jsonl(tmp_path / "events.jsonl") if e["event"] == "reward_skipped"]
    assert event["reward"] == "ends_in_a" and event["reason"] == "failed" and "took over 1s" in event["error"]


def test_a_multi_grader_refuses_a_sub_score_too_large_for_a_float(tmp_path, monkeypatch):
    module = tmp_path / "huge_mod.py"
    module.write_text("def huge(prompts, completions, **kw):\n    return [10**400 for _ in completions]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = tmp_path / "multi.yaml"
    spec.write_text(
        "graders:\n  - name: both\n    type: multi\n    graders:\n"
        "      a: {type: rule, rule: 'huge_mod:huge'}\n      b: {type: regex, pattern: 'x'}\n",
        encoding="utf-8",
    )
    reward = CompositeReward.from_spec(spec)
    assert reward(["p", "p"], ["x", "y"]) == [1.0, 0.0]  # a is refused, b alone decides
    from ark_trainer.rewards.graders import failures

    count, reason = failures(reward.components[0].fn)
    assert count == 2 and "sub-grader 'a'" in reason
