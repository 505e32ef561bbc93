"""A reward model or LLM judge in the loop's reward can veto a hinted answer the word filter let through
(``services/loop/safety.py``: ``veto_hints``, called by ``rounds.scored_rows``): the turn becomes a plain correction,
counted as ``judge_veto``; a reward without such a component, or a judge that cannot score, vetoes nothing."""

from __future__ import annotations

from collections import Counter

from ark_trainer.rewards.composite import Component, CompositeReward
from ark_trainer.rewards.reward_model import LazyRewardModel
from ark_trainer.services.loop import feedback, rounds
from tests.loop.corrections import conversation


class FakeScorer:
    """A loaded reward model that dislikes a wrong promise ("三十天"); ``None`` for answers it cannot read."""

    def __call__(self, prompts, completions, **columns):
        return [None if "???" in c else 0.1 if "三十天" in c else 0.9 for c in completions]


def judged_reward(with_judge: bool = True) -> CompositeReward:
    def length(prompts, completions, **_):
        return [0.0 for _ in completions]  # a grader that is no judge: it must never veto

    comps = [Component("length", length, 1.0)]
    if with_judge:
        model = LazyRewardModel("unused")
        model.scorer = FakeScorer()  # type: ignore[assignment]
        comps.append(Component("reward_model", model, 1.0))
    return CompositeReward(comps)


def rows_with_hints() -> list[dict]:
    rows = conversation("怎么退款？", "不行。", "不对，应该回答：退款要三十天以上，请找我们的专员")
    rows += conversation("几天到？", "不知道。", "不对，应该回答：一般三天内送达。")
    rows += conversation("能开发票吗？", "不能。", "不对，应该回答：???")
    return rows


def test_a_judge_vetoes_a_hint_it_scores_low_and_it_is_counted():
    rows = rows_with_hints()
    dropped: Counter = Counter()
    out = rounds.scored_rows(rows, rows, feedback.Rules(), judged_reward(), False, dropped)
    assert dropped == {"judge_veto": 1}
    assert sorted(r.get("reference", "") for r in out if r["feedback"] == -1) == [
        "",
        "???",
        "一般三天内送达。",
    ]
    vetoed = [r for r in out if r["feedback"] == -1 and "reference" not in r]
    assert vetoed and all(r["messages"][-1]["role"] == "user" for r in vetoed)  # nothing to imitate
    assert "专员" not in str([m for r in out for m in r["messages"] if m["role"] == "assistant"])


def test_without_a_judge_or_a_reward_nothing_is_vetoed():
    for reward in (judged_reward(with_judge=False), None):
        rows = rows_with_hints()
        dropped: Counter = Counter()
        out = rounds.scored_rows(rows, rows, feedback.Rules(), reward, False, dropped)
        assert not dropped and sum("reference" in r for r in out) == 3


def test_the_veto_threshold_is_the_mean_of_the_judges_scores():
    from ark_trainer.services.loop.safety import veto_hints

    row = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "三十天"}],
           "reference": "三十天", "feedback": -1}  # fmt: skip
    veto_hints([row], judged_reward(), threshold=0.05)
    assert row["reference"] == "三十天"
    veto_hints([row], judged_reward())
    assert "reference" not in row and row["messages"] == [{"role": "user", "content": "q"}]
