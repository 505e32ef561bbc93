"""The long-running loop: serve, record, score, train a round, gate, promote or keep, repeat.

    ark-trainer loop --output_dir LOOP --model_path M [--eval_dataset HELDOUT.jsonl] [train flags]

One tick every ``--poll`` seconds (see :func:`tick`): a rollback asked for by ``loop --rollback N`` is
served; a round in training is checked and, once it has ended, gated (:mod:`ark_trainer.loop.gate`) and
promoted or refused; otherwise, when ``--min_new_turns`` new scored turns have been recorded (or
``--every`` seconds have passed with at least one), the next round starts. Everything the loop knows is in
``LOOP/state.json`` (atomic writes), so a supervisor killed at any point resumes on restart: the served
model is whatever ``LOOP/model`` points to (always a complete model), a round still training is waited
for, a round that died half-way is started again from the turns it had.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ark_trainer.config import TrainConfig
from ark_trainer.errors import UserError
from ark_trainer.fileio import json_line, jsonl_file_lines, read_json, write_json, write_jsonl
from ark_trainer.loop import feedback, gate, rounds, serving
from ark_trainer.loop.state import fresh_state, load_state, model_of, now, save_state
from ark_trainer.metrics import REWARD_MEAN
from ark_trainer.runtime.system import pid_alive

ROLLBACK_REQUEST = "rollback.json"


@dataclass
class LoopSettings:
    min_new_turns: int = 30
    every: float = 0.0
    max_regression: float = 0.02
    min_improvement: float = 0.0
    main_metric: str = REWARD_MEAN
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
        self.stopping = False
        self.reward: Any = None
        self.state: dict[str, Any] = {}
        self.last_round_at = time.time()

    # --- start / resume ---
    def start(self) -> None:
        state = load_state(self.dir)
        if state is None:
            model = self.flags.get("model_path")
            if not model:
                raise UserError("loop: --model_path is required to start a loop (a local Hugging Face model)")
            self._check_model(Path(model))
            from ark_trainer.folders import check_folder, claim_folder

            check_folder(self.dir, "--output_dir", "loop")  # never a folder of the user's other files
            claim_folder(self.dir, "loop")
            state = fresh_state(model, {k: v for k, v in vars(self.s).items()} | {"train_flags": self.flags})
            self._freeze_heldout()
        else:
            self.log(f"loop: resuming {self.dir} (serving round {state['serving']})")
            self.flags = {**state["settings"].get("train_flags", {}), **self.flags}
        self.state = state
        other = state.get("supervisor_pid")
        if other and other != os.getpid() and pid_alive(other):
            raise UserError(
                f"loop: {self.dir} is already supervised by pid {other}; stop it with --stop first"
            )
        state["supervisor_pid"] = os.getpid()
        self.save()
        self._build_reward()
        serving.point_model(self.dir, model_of(self.dir, state, state["serving"]))
        serving.serve(self.dir, state["serving"], self.s.port, self.s.agent, log=self.log)

    def _check_model(self, model: Path) -> None:
        if not (model / "config.json").is_file() or not list(model.glob("*.safetensors")):
            raise UserError(f"--model_path: {model} holds no model (config.json + *.safetensors)")

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
        from ark_trainer.data.loader import load_jsonl
        from ark_trainer.rewards.builder import build_reward

        heldout = self.dir / "heldout.jsonl"
        rows = load_jsonl(heldout, "heldout") if heldout.is_file() else []
        self.reward = (
            build_reward(self.flags, rows, "cpu") if rows or self.flags.get("reward_config") else None
        )

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
        return bool(self.s.max_rounds) and len(self.state["history"]) >= self.s.max_rounds

    def _shutdown(self) -> None:
        training = self.state.get("training")
        if self.stopping and training and pid_alive(training["pid"]):
            os.killpg(training["pid"], signal.SIGTERM)  # restarted from its turns on the next start
        self.state["supervisor_pid"] = None
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
        from ark_trainer.deploy.record import read_turns

        all_rows = read_turns(self.dir / serving.TURNS)
        used = self.state["turns_used"]
        rows = rounds.scored_rows(
            all_rows, all_rows[used:], self.rules, self.reward, self.s.keep_system_prompt
        )
        return [r for r in rows if rounds.is_scored(r)], len(all_rows)

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
        due = len(scored) >= self.s.min_new_turns
        scheduled = self.s.every > 0 and scored and time.time() - self.last_round_at >= self.s.every
        if due or scheduled:
            self._start_round(scored, total)

    def _fit(self, rows: list[dict], model: Path) -> list[dict]:
        """Turns fitted into ``model``'s window, as the server fits requests (:func:`rounds.fit_rows`)."""
        reply = int(self.flags.get("max_completion_length") or TrainConfig.max_completion_length)
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
        eval_text = (self.dir / "heldout.jsonl").read_text(encoding="utf-8")
        rounds.write_round(folder, train_rows, [])
        (folder / "eval.jsonl").write_text(eval_text + "".join(_lines(newest)), encoding="utf-8")
        argv = rounds.train_argv(folder, model, self.flags, n)
        pid = rounds.start_training(folder, argv)
        self.state.update(training={"round": n, "pid": pid, "started_at": now(), "turns_to": total,
                                    "n_train": len(train_rows), "n_eval": len(heldout) + k, "n_newest": k})  # fmt: skip
        self.state["next_round"] = n + 1
        self.state["events"].append({"at": now(), "event": "round_started", "round": n})
        self.save()
        self.last_round_at = time.time()
        self.log(f"loop: round {n} training on {len(train_rows)} turns (pid {pid}, nice +{rounds.NICE})")

    def _check_round(self) -> None:
        training = self.state["training"]
        code = rounds.exit_code(training["pid"])
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
                False, [f"training did not finish (exit code {code}); see {folder}/train.log"]
            )
        else:
            n_heldout = training["n_eval"] - training.get("n_newest", 0)
            current, candidate = (
                gate.with_heldout(current, n_heldout),
                gate.with_heldout(candidate, n_heldout),
            )
            decision = gate.decide(current, candidate, self.s.main_metric, self.s.max_regression,
                                   self.s.min_improvement)  # fmt: skip
        self._decided(n, folder, decision, stage)

    def _decided(self, n: int, folder: Path, decision: gate.Decision, stage: str | None) -> None:
        write_json(
            folder / "decision.json", {"round": n, "stage": stage, "decided_at": now(), **decision.as_json()}
        )
        main = decision.candidate.get(self.s.main_metric)
        self.state["history"].append({"round": n, "promoted": decision.promote, "reasons": decision.reasons,
                                      "main": main, "current_main": decision.current.get(self.s.main_metric),
                                      "decided_at": now()})  # fmt: skip
        self.state["turns_used"] = self.state["training"]["turns_to"]
        self.state["training"] = None
        self.save()
        verdict = "promoted" if decision.promote else "refused"
        self.log(f"loop: round {n} {verdict}: {'; '.join(decision.reasons)}")
        if decision.promote:
            self.switch_to(n, "promote")
        self._write_report()

    def switch_to(self, n: int, event: str) -> None:
        """Serve round ``n`` (promotion or rollback): repoint ``LOOP/model``, restart the server on it."""
        before = self.state["serving"]
        serving.point_model(self.dir, model_of(self.dir, self.state, n))
        try:
            serving.serve(self.dir, n, self.s.port, self.s.agent, log=self.log)
        except Exception:
            serving.point_model(self.dir, model_of(self.dir, self.state, before))
            serving.serve(self.dir, before, self.s.port, self.s.agent, log=self.log)
            raise
        self.state["serving"] = n
        self.state["events"].append({"at": now(), "event": event, "round": n, "from": before})
        self.save()

    def _serve_rollback_request(self) -> None:
        path = self.dir / ROLLBACK_REQUEST
        if not path.is_file():
            return
        n = int(read_json(path)["round"])
        path.unlink()
        if n != self.state["serving"]:
            self.switch_to(n, "rollback")
            self._write_report()

    def _write_report(self) -> None:
        from ark_trainer.loop.report import write_report

        write_report(self.dir, self.state)


def _lines(rows: list[dict]) -> list[str]:
    return [json_line(r) for r in rows]


def servable_rounds(folder: Path, state: dict) -> list[int]:
    """Rounds that may be served: the starting model (0) and every round the gate promoted."""
    return [0] + [h["round"] for h in state["history"] if h["promoted"]]


def request_rollback(folder: Path, n: int, log=print, timeout: float = 600) -> None:
    """``loop --rollback N``: serve round N again (through the running supervisor, or directly)."""
    folder = Path(folder).resolve()
    state = load_state(folder)
    if state is None:
        raise UserError(f"loop --rollback: {folder} is not a loop folder (no state.json)")
    if n not in servable_rounds(folder, state):
        raise UserError(
            f"--rollback: round {n} was never promoted; choose one of {servable_rounds(folder, state)}"
        )
    pid = state.get("supervisor_pid")
    if pid and pid_alive(pid):
        write_json(folder / ROLLBACK_REQUEST, {"round": n, "asked_at": now()})
        deadline = time.time() + timeout
        while time.time() < deadline:
            if (load_state(folder) or {}).get("serving") == n and not (folder / ROLLBACK_REQUEST).exists():
                log(f"loop: serving round {n}")
                return
            time.sleep(0.5)
        raise UserError(f"loop --rollback: the supervisor (pid {pid}) did not switch within {timeout:.0f}s")
    loop = Loop(
        folder, LoopSettings(**{k: v for k, v in state["settings"].items() if k != "train_flags"}), {}, log
    )
    loop.state = state
    loop.switch_to(n, "rollback")
    loop._write_report()
    log(f"loop: serving round {n}")


def stop_loop(folder: Path) -> str:
    """``loop --stop``: SIGTERM the supervisor (it stops a round in training), stop the model server."""
    from ark_trainer.openclaw.deploy import stop

    folder = Path(folder).resolve()
    state = load_state(folder)
    if state is None:
        raise UserError(f"loop --stop: {folder} is not a loop folder (no state.json)")
    pid = state.get("supervisor_pid")
    said = []
    if pid and pid_alive(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.time() + 30
        while pid_alive(pid) and time.time() < deadline:
            time.sleep(0.2)
        said.append(f"stopped the supervisor (pid {pid})")
    try:
        said.append("stopped the model server" if stop(str(folder)) else "the model server was not running")
    except UserError:
        said.append("no model server was deployed")
    return "; ".join(said) + "; `ark-trainer deploy LOOP --rollback` restores OpenClaw's config"
