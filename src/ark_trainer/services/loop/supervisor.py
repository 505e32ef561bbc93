"""The long-running loop: serve, record, score, train a round, gate, promote or keep, repeat.

    ark-trainer loop --output_dir LOOP --model_path M [--eval_dataset HELDOUT.jsonl] [train flags]

One tick every ``--poll`` seconds (see :func:`tick`): a rollback asked for by ``loop --rollback N`` is
served; a round in training is checked and, once it has ended, gated (:mod:`ark_trainer.services.loop.gate`) and
promoted or refused (a round whose training failed gives its turns back); otherwise, when
``--min_new_turns`` new turns with a training target have been recorded (or ``--every`` seconds have
passed with at least one), the next round starts. Everything the loop knows is in
``LOOP/state.json`` (atomic writes), so a supervisor killed at any point resumes on restart: the served
model is whatever ``LOOP/model`` points to (always a complete model), a round still training is waited
for, a round that died half-way is started again from the turns it had.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import (
    MAX_LINES_BYTES,
    json_line,
    jsonl_file_lines,
    read_json,
    read_text_bounded,
    write_json,
    write_jsonl,
)
from ark_trainer.core.metrics import REWARD_MEAN, TASK_ACCURACY
from ark_trainer.core.models.source import check_model, convert
from ark_trainer.core.runtime.system import process_start, same_process
from ark_trainer.services.loop import feedback, gate, rounds, serving
from ark_trainer.services.loop.report import reason_counts
from ark_trainer.services.loop.state import fresh_state, load_state, model_of, now, save_state

ROLLBACK_REQUEST = "rollback.json"
EVAL_CACHE = "eval_cache"  # every round's evaluation answers, by model (evaluate.AnswerCache)


@dataclass
class LoopSettings:
    min_new_turns: int = 30
    every: float = 0.0
    max_regression: float = 0.02
    min_improvement: float = 0.0
    main_metric: str = "auto"
    eval_newest: int = 4
    heldout_size: int = 8
    keep_system_prompt: bool = False
    feedback_rules: str | None = None
    max_rounds: int = 0
    poll: float = 2.0
    port: int | None = None
    agent: str | None = None


class Loop:
    """One loop folder's supervisor (see the module docstring)."""

    def __init__(self, folder: Path, settings: LoopSettings, train_flags: dict[str, Any], log=print) -> None:
        self.dir, self.s, self.flags, self.log = Path(folder).resolve(), settings, train_flags, log
        self.rules = feedback.load_rules(settings.feedback_rules)
        self.wanted_metric = settings.main_metric  # "auto" is resolved once the held-out set is frozen
        self.stopping = False
        self.reward: Any = None
        self.state: dict[str, Any] = {}
        self.last_round_at = time.time()
        self.dropped: Counter[str] = Counter()  # corrections the safety filter refused, in the newest turns

    # --- start / resume ---
    def start(self) -> None:
        state = load_state(self.dir)
        if state is None:
            model = self.flags.get("model_path")
            if not model:
                raise UserError(
                    "loop: --model_path is required to start a loop (a Hugging Face folder, a .gguf file or "
                    "ollama:NAME)"
                )
            source = check_model(str(model), flag="--model_path")  # checked before the loop folder exists
            rounds.check_train_flags(self.flags, self.dir)  # a mistyped flag: refused now, not at round 1
            if self.s.port:  # before the folder exists: a taken port is one line, nothing written
                from ark_trainer.services.deploy.process import check_port

                check_port(self.s.port)
            from ark_trainer.core.folders import check_folder, claim_folder

            check_folder(self.dir, "--output_dir", "loop")  # never a folder of the user's other files
            created = not self.dir.exists()
            claim_folder(self.dir, "loop")
            try:  # a refused model, held-out set or main metric leaves no loop folder behind
                base = convert(source, self.dir / "base_model")  # a GGUF / Ollama model: converted once, here
                state = fresh_state(
                    str(base.path), {k: v for k, v in vars(self.s).items()} | {"train_flags": self.flags}
                )
                state["base_model"] = base.to_json()
                self.state = state
                self._freeze_heldout()
                self._build_reward()
                self._resolve_reply_tokens()
            except BaseException:
                if created:
                    shutil.rmtree(self.dir, ignore_errors=True)
                raise
        else:
            self.log(f"loop: resuming {self.dir} (serving round {state['serving']})")
            self.flags = {**state["settings"].get("train_flags", {}), **self.flags}
            self.state = state
            self._build_reward()
        other = state.get("supervisor_pid")
        if other and other != os.getpid() and same_process(other, state.get("supervisor_started")):
            raise UserError(
                f"loop: {self.dir} is already supervised by pid {other}; stop it with --stop first"
            )
        state["supervisor_pid"], state["supervisor_started"] = os.getpid(), process_start(os.getpid())
        self.save()
        serving.point_model(self.dir, model_of(self.dir, state, state["serving"]))
        serving.serve(self.dir, state["serving"], self.s.port, self.s.agent, log=self.log,
                      reply_tokens=state.get("reply_tokens"))  # fmt: skip

    def _freeze_heldout(self) -> None:
        """``LOOP/heldout.jsonl``, fixed for the loop's life: --eval_dataset, else the first --heldout_size
        rows of --data_path; without either, the first scored turns (taken before round 1)."""
        from ark_trainer.data.loader import load_jsonl, resolve_eval_path

        source = self.flags.get("eval_dataset")
        if source:
            path = resolve_eval_path(str(source))
            load_jsonl(path, "--eval_dataset")  # refused here, one line per problem, before anything runs
            shutil.copyfile(path, self.dir / "heldout.jsonl")
        elif self.flags.get("data_path"):
            lines = jsonl_file_lines(self.flags["data_path"])
            load_jsonl(self.flags["data_path"], "--data_path")
            (self.dir / "heldout.jsonl").write_text(
                "".join(line + "\n" for line in [x for x in lines if x.strip()][: self.s.heldout_size]),
                encoding="utf-8",
            )

    def _build_reward(self) -> None:
        """The loop's one reward: it scores the turns, trains every round (passed as ``--reward_config``)
        and grades the gate's held-out rows; ``--reward_config``, else the preset the held-out rows call
        for (``qc`` for QC labels). Checked on the held-out rows here, when the loop starts."""
        from ark_trainer.data.loader import load_jsonl
        from ark_trainer.rewards.builder import build_reward
        from ark_trainer.rewards.composite import default_preset, preset_path

        heldout = self.dir / "heldout.jsonl"
        rows = load_jsonl(heldout, "heldout") if heldout.is_file() else []
        if not rows and not self.flags.get("reward_config"):
            self.reward = None  # chosen once the held-out set is frozen from the first turns
            return
        spec = str(self.flags.get("reward_config") or preset_path(default_preset(rows)))
        self.reward = build_reward({**self.flags, "reward_config": spec}, rows, "cpu")
        if self.state.get("reward_config") != spec:
            why = (
                "--reward_config"
                if self.flags.get("reward_config")
                else "the preset the held-out rows call for"
            )
            self.log(
                f"loop: one reward scores the turns, trains every round and grades the gate: {spec} ({why})"
            )
        self.state["reward_config"] = spec
        if rows:  # the gate's main metric must be one these rows measure (else no round could pass)
            from ark_trainer.rewards.applies import check_applies

            self._resolve_main_metric(rows, str(heldout))
            # every round trains with this reward: it must grade the held-out rows the gate reads
            check_applies(self.reward, rows, str(heldout), self.task_graders)

    def _resolve_reply_tokens(self) -> None:
        """The answers' length the loop serves, trains every round with and evaluates: --max_completion_length,
        else what the starting model was trained with (recorded by ``train``), else the held-out rows'
        answers in the model's tokens (``train``'s own rule), else ``train``'s fallback. One length, so a
        round is served as it was trained and gated, and a base model does not ramble to a share of its
        window."""
        from ark_trainer.core.auto_defaults import LENGTH_FALLBACK, completion_length
        from ark_trainer.data.loader import load_jsonl
        from ark_trainer.services.deploy.policy import read_shape

        model = Path(self.state["model_path"])
        recorded = read_shape(model) if model.is_dir() else None
        heldout = self.dir / "heldout.jsonl"
        if self.flags.get("max_completion_length"):
            n, why = int(self.flags["max_completion_length"]), "--max_completion_length"
        elif recorded is not None and recorded.reply_tokens:
            n, why = recorded.reply_tokens, "what the starting model was trained and evaluated with"
        elif heldout.is_file():
            from ark_trainer.core.models.loading import load_tokenizer

            chosen = completion_length(load_tokenizer(str(model), False), load_jsonl(heldout, "heldout"))
            n, why = int(chosen.value), f"the held-out answers: {chosen.reason}"
        else:
            n, why = LENGTH_FALLBACK, "train's fallback: no answer to measure yet"
        self.state["reply_tokens"] = n
        self.log(f"loop: answers of up to {n} tokens, served and trained ({why})")

    @property
    def task_graders(self) -> list[str] | None:
        """The graders of the loop's reward that carry the task: a preset's first (its format rules apply to
        any text and say nothing of the task) and a reward model; every weighted one of a --reward_config."""
        if self.flags.get("reward_config") or self.reward is None:
            return None
        return [self.reward.components[0].name, "reward_model"]

    def _resolve_main_metric(self, rows: list[dict], where: str) -> None:
        measures = gate.heldout_measures(rows, self.reward, self.task_graders)
        main = gate.resolve_main_metric(self.wanted_metric, measures, where, self.s.min_improvement)
        how = f"--main_metric {self.wanted_metric}"
        if self.wanted_metric == "auto":
            how += (
                ": the held-out rows are labelled" if main == TASK_ACCURACY else ": no labelled held-out rows"
            )
        self.log(f"loop: the gate's main metric is {main} ({how})")
        self.s.main_metric = self.state["settings"]["main_metric"] = main

    @property
    def main_metric(self) -> str:
        """The gate's main metric, resolved from ``auto`` once the held-out set is frozen."""
        return self.s.main_metric if self.s.main_metric != "auto" else REWARD_MEAN

    def save(self) -> None:
        save_state(self.dir, self.state)

    # --- the loop ---
    def run(self) -> None:
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        try:
            while not self.stopping and not self._done():
                self.tick()
                time.sleep(self.s.poll)
        finally:
            self._shutdown()

    def _stop(self, *_: Any) -> None:
        self.stopping = True

    def _done(self) -> bool:
        decided = [h for h in self.state["history"] if not h.get("failed")]  # a failed round is no round
        return bool(self.s.max_rounds) and len(decided) >= self.s.max_rounds

    def _shutdown(self) -> None:
        try:  # a rollback asked for while the last round was decided: served before leaving
            self._serve_rollback_request()
        except Exception as exc:  # noqa: BLE001 - the state must still be saved; the requester retries
            self.log(
                f"loop: the rollback asked for could not be served ({exc}); `loop --rollback` retries it"
            )
        training = self.state.get("training")
        if self.stopping and training and same_process(training["pid"], training.get("started")):
            os.killpg(training["pid"], signal.SIGTERM)  # restarted from its turns on the next start
        self.state["supervisor_pid"] = self.state["supervisor_started"] = None
        self.save()
        self.log(
            "loop: stopped; the server keeps serving (`ark-trainer loop --output_dir LOOP --stop` stops it)"
        )

    def tick(self) -> None:
        self._serve_rollback_request()
        if self.state.get("training"):
            self._check_round()
        else:
            self._maybe_start_round()

    # --- rounds ---
    def _new_rows(self) -> tuple[list[dict], int]:
        from ark_trainer.services.deploy.record import read_turns

        all_rows = read_turns(self.dir / serving.TURNS)
        used = self.state["turns_used"]
        self.dropped = Counter()
        rows = rounds.scored_rows(all_rows, all_rows[used:], self.rules, self.reward, self.s.keep_system_prompt,
                                  self.dropped, self.task_graders)  # fmt: skip
        return rounds.round_rows(rows), len(all_rows)

    def _maybe_start_round(self) -> None:
        scored, total = self._new_rows()
        if not (self.dir / "heldout.jsonl").is_file():
            if len(scored) >= self.s.heldout_size:
                serving = model_of(self.dir, self.state, self.state["serving"])
                write_jsonl(self.dir / "heldout.jsonl", self._fit(scored[: self.s.heldout_size], serving))
                self.state["turns_used"] = total
                self.save()
                self._build_reward()
            return
        failed_at = self.state.get("failed_at_turns")
        if failed_at is not None and total < failed_at + self.s.min_new_turns:
            return  # the last round failed on these turns: tried again with --min_new_turns more, not at once
        due = len(scored) >= self.s.min_new_turns
        scheduled = self.s.every > 0 and scored and time.time() - self.last_round_at >= self.s.every
        if due or scheduled:
            self._start_round(scored, total)

    def _fit(self, rows: list[dict], model: Path) -> list[dict]:
        """Turns fitted into ``model``'s window, as the server fits requests (:func:`rounds.fit_rows`)."""
        from ark_trainer.core.auto_defaults import LENGTH_FALLBACK

        reply = int(self.round_flags.get("max_completion_length") or LENGTH_FALLBACK)
        rows, fitted = rounds.fit_rows(rows, model, reply)
        if fitted:
            self.log(
                f"loop: {fitted} of {len(rows)} turns fitted into the model's window (as the server fits them)"
            )
        return rows

    def _start_round(self, scored: list[dict], total: int) -> None:
        from ark_trainer.data.loader import load_jsonl

        n = self.state["next_round"]
        folder = self.dir / "rounds" / str(n)
        if folder.exists():  # an earlier attempt that died half-way: kept aside, started again
            folder.rename(folder.with_name(f"{n}.interrupted-{int(time.time())}"))
        model = model_of(self.dir, self.state, self.state["serving"])
        scored = self._fit(scored, model)
        k = min(self.s.eval_newest, max(0, len(scored) - 1))
        train_rows, newest = scored[: len(scored) - k], scored[len(scored) - k :]
        heldout = load_jsonl(self.dir / "heldout.jsonl", "heldout")
        eval_text = read_text_bounded(self.dir / "heldout.jsonl", MAX_LINES_BYTES)
        rounds.write_round(folder, train_rows, [])
        (folder / "eval.jsonl").write_text(eval_text + "".join(_lines(newest)), encoding="utf-8")
        self.log(
            f"loop: round {n}: {rounds.expected_cost(self.dir, self.state['history'], len(heldout) + k, k)}"
        )
        argv = rounds.train_argv(folder, model, self.round_flags, n)
        pid = rounds.start_training(folder, argv)
        self.state.update(training={"round": n, "pid": pid, "started": process_start(pid), "started_at": now(), "turns_to": total,
                                    "n_train": len(train_rows), "n_eval": len(heldout) + k, "n_newest": k,
                                    "corrections_dropped": dict(self.dropped)})  # fmt: skip
        self.state["next_round"] = n + 1
        self.state["events"].append({"at": now(), "event": "round_started", "round": n})
        self.save()
        self.last_round_at = time.time()
        self.log(f"loop: round {n} training on {len(train_rows)} turns (pid {pid}, nice +{rounds.NICE})")
        if self.dropped:
            self.log(
                f"loop: round {n}: corrections dropped by the safety filter: {reason_counts(self.dropped)}"
            )

    def _check_round(self) -> None:
        training = self.state["training"]
        code = rounds.exit_code(training["pid"], training.get("started"))
        if training.get("choices") is None:
            self._announce_choices(training)
        if code is None:
            return
        n, folder = training["round"], self.dir / "rounds" / str(training["round"])
        current, candidate, stage = rounds.evaluations(folder)
        if code not in (0, -1) or not rounds.complete_model(folder) or current is None or candidate is None:
            if code == -1 and not rounds.complete_model(folder):  # died with the supervisor: start again
                self.state.update(training=None, next_round=n)
                self.save()
                return
            decision = gate.Decision(
                False, [f"training did not finish (exit code {code}); see {folder}/train.log; its turns go to "
                        "the next round"]
            )  # fmt: skip
            return self._decided(n, folder, decision, stage, failed=True)
        else:
            frozen = rounds.frozen_flags(folder, training["n_eval"] - training.get("n_newest", 0))
            current, candidate = gate.with_heldout(current, frozen), gate.with_heldout(candidate, frozen)
            decision = gate.decide(current, candidate, self.main_metric, self.s.max_regression,
                                   self.s.min_improvement)  # fmt: skip
        self._decided(n, folder, decision, stage)

    def _announce_choices(self, training: dict) -> None:
        """Say and record what the round's ``train`` chose by itself (full fine-tuning or LoRA, learning
        rates, steps), once its plan is written."""
        choices = rounds.plan_choices(self.dir / "rounds" / str(training["round"]))
        if choices is None:
            return
        for line in rounds.choice_lines(choices):
            self.log(f"loop: round {training['round']}: {line}")
        training["choices"] = choices
        self.save()

    @property
    def round_flags(self) -> dict[str, Any]:
        """The train flags of every round: the loop's, with the loop's one reward and reply length unless
        the user set them."""
        own = {
            "reward_config": self.state.get("reward_config"),
            "max_completion_length": self.state.get("reply_tokens"),
            "eval_answer_cache": str(self.dir / EVAL_CACHE),  # the served model's answers: once per model
        }
        return {
            **{k: v for k, v in own.items() if v is not None},
            **{k: v for k, v in self.flags.items() if v is not None},
        }

    def _decided(
        self, n: int, folder: Path, decision: gate.Decision, stage: str | None, failed: bool = False
    ) -> None:
        """Record the round's decision. A round that failed (its training did not finish) gives its turns
        back: they go to the next round, which starts once --min_new_turns more turns are recorded (a failure
        that repeats is not retried on every turn), and it does not count toward --max_rounds."""
        write_json(
            folder / "decision.json", {"round": n, "stage": stage, "decided_at": now(), **decision.as_json()}
        )
        main = decision.candidate.get(self.main_metric)
        self.state["history"].append({"round": n, "promoted": decision.promote, "reasons": decision.reasons,
                                      "main": main, "current_main": decision.current.get(self.main_metric),
                                      "corrections_dropped": self.state["training"].get("corrections_dropped", {}),
                                      "choices": self.state["training"].get("choices", {}),
                                      "started_at": self.state["training"].get("started_at"),
                                      "n_eval": self.state["training"].get("n_eval"),
                                      "decided_at": now(), **({"failed": True} if failed else {})})  # fmt: skip
        if failed:
            self.state["failed_at_turns"] = self.state["training"]["turns_to"]
        else:
            self.state["turns_used"] = self.state["training"]["turns_to"]
        self.state["training"] = None
        self.save()
        verdict = "promoted" if decision.promote else "failed" if failed else "refused"
        self.log(f"loop: round {n} {verdict}: {'; '.join(decision.reasons)}")
        if decision.promote:
            self.switch_to(n, "promote")
        self._write_report()

    def switch_to(self, n: int, event: str) -> None:
        """Serve round ``n`` (promotion or rollback): repoint ``LOOP/model``, restart the server on it."""
        before = self.state["serving"]
        serving.point_model(self.dir, model_of(self.dir, self.state, n))
        try:
            serving.serve(self.dir, n, self.s.port, self.s.agent, log=self.log,
                          reply_tokens=self.state.get("reply_tokens"))  # fmt: skip
        except Exception:
            serving.point_model(self.dir, model_of(self.dir, self.state, before))
            serving.serve(self.dir, before, self.s.port, self.s.agent, log=self.log,
                          reply_tokens=self.state.get("reply_tokens"))  # fmt: skip
            raise
        self.state["serving"] = n
        self.state["events"].append({"at": now(), "event": event, "round": n, "from": before})
        self.save()

    def _serve_rollback_request(self) -> None:
        n = claim_rollback_request(self.dir)
        if n is not None and n != self.state["serving"]:
            self.switch_to(n, "rollback")
            self._write_report()

    def _write_report(self) -> None:
        from ark_trainer.services.loop.report import write_report

        write_report(self.dir, self.state)


def _lines(rows: list[dict]) -> list[str]:
    return [json_line(r) for r in rows]


def claim_rollback_request(folder: Path) -> int | None:
    """Take ``LOOP/rollback.json`` (one rename: the supervisor and ``loop --rollback`` may both try; one
    wins) and return the round it asks for, or None when there is none (left)."""
    claimed = Path(folder) / f".{ROLLBACK_REQUEST}.{os.getpid()}"
    try:
        os.rename(Path(folder) / ROLLBACK_REQUEST, claimed)
    except FileNotFoundError:
        return None
    try:
        return int(read_json(claimed)["round"])
    finally:
        claimed.unlink(missing_ok=True)
