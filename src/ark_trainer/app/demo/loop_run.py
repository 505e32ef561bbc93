"""``ark-trainer demo --task loop``: the live loop measured, on a kind of case its model never saw.

1. **Data** (``app/demo/loop_scenario.py``): the starting model's training rows without :data:`NEW_KIND`, a
   held-out set sized to the smallest difference the gate must detect (``--mde_points``: its dev half is
   :func:`~ark_trainer.data.split.rows_for_mde` rows, printed), and the pool the users ask from.
2. **The starting model**: ``train`` (RFT on the gold answers) from the toy base model shipped with the
   package, on the rows without the new kind; with ``--base_model`` from that model instead.
3. **The loop**: ``ark-trainer loop`` in its own process, serving that model; ``HOME`` and OpenClaw's state
   are the demo's folder's own (``OUT/home``, ``OUT/openclaw``), so the loop's deploy patches that
   OpenClaw config, never the user's. Each round trains on the newest turns in the background, is gated
   on the round's dev split, hot-swapped in when promoted, and reported on its test split.
4. **The users** (``app/demo/loop_users.py``): :data:`HTTP_USERS` threads ask pool questions straight to the
   served model in OpenClaw's recorded request shape; ``--openclaw_share`` of the sessions go through the
   real ``openclaw agent --local``. In the poison round (the last, unless ``--rounds`` is 1),
   ``--poison_share`` of the sessions teach wrong answers (a wrong type, a credential request, an API key).
5. **The report** (``app/demo/loop_report.py``): ``OUT/loop_report.md`` and ``OUT/loop_report.json``.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from itertools import cycle
from pathlib import Path

from ark_trainer.app.demo.loop_scenario import NEW_KIND, POISON_KINDS, heldout_size, write_scenario_data
from ark_trainer.app.demo.loop_users import HttpAgent, Ledger, http_session, loop_state, openclaw_session
from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import read_json, read_jsonl
from ark_trainer.services.loop.replay import DEFAULT_SHARE

HTTP_USERS = 4


@dataclass(frozen=True)
class Sizes:
    """What the scenario trains and measures: the starting model's rows and steps, the rounds' turns and
    steps, the held-out set (from the detectable difference), the users' pool."""

    n_start: int = 600  # generated rows; those of the new kind are dropped
    # 200 steps: at 80 the toy named the old kinds at about the rate of guessing (29.6% on the test split), so a
    # round could learn the new kind only by answering it everywhere; at 200 it names them (100% of the test
    # split's old-kind rows), and rounds learn the new kind beside them
    start_steps: int = 200  # 0: the base model itself is the starting model (tests)
    start_batch: int = 32
    start_learning_rate: float | None = 5e-3
    reply_tokens: int | None = 40  # the toy's answers (the QC demo's preset); None: train's choice
    min_new_turns: int = 40
    round_steps: int = 30
    round_batch: int = 16
    # 2e-3 learnt the new kind and unlearnt the others; 5e-4 learnt nothing
    round_learning_rate: float | None = 1e-3
    eval_newest: int = 4
    mde_points: float = 20.0
    n_heldout: int | None = None  # default: heldout_size(mde_points)
    timeout: float = 3600.0  # the whole scenario, users and rounds
    # a user's pause between sessions: the toy answers in a fraction of a second, so 4 users at 3 s ask ~0.8
    # sessions a second; a real model on 2 cores takes seconds an answer, and users that never pause would keep
    # both cores answering, starving the round that trains beside them
    think_seconds: float = 3.0

    @property
    def heldout(self) -> int:
        return self.n_heldout or heldout_size(self.mde_points)


TOY = Sizes()
# --base_model: the real QC demo's RFT (presets/demo_real.yaml: 140 steps at 1e-4 taught SmolLM2 the types, 80
# did not), rounds at the same rate; LoRA, precision and the reply budget left to train's choices
REAL = Sizes(n_start=2000, start_steps=140, start_batch=8, start_learning_rate=1e-4, reply_tokens=None,
             round_batch=8, round_steps=30, round_learning_rate=1e-4, timeout=6 * 3600.0, think_seconds=20.0)  # fmt: skip


def say(text: str) -> None:
    print(f"loop demo: {text}", flush=True)


def check_loop_demo_args(
    rounds: int, poison_share: float, openclaw_share: float, mde_points: float
) -> str | None:
    """Each flag in its range (one line naming it); returns the OpenClaw CLI to use (None: share 0)."""
    if not 1 <= rounds <= 20:
        raise UserError(f"--rounds: expected an integer in [1, 20], got {rounds}")
    for name, value in (("poison_share", poison_share), ("openclaw_share", openclaw_share)):
        if not 0 <= value <= 1:
            raise UserError(f"--{name}: expected a share in [0, 1], got {value}")
    if not 2 <= mde_points <= 50:
        raise UserError(f"--mde_points: expected percentage points in [2, 50], got {mde_points}")
    if openclaw_share == 0:
        return None
    from ark_trainer.base.external.openclaw_cli import find_openclaw

    found = find_openclaw()
    if found is None:
        raise UserError(
            "--openclaw_share: the OpenClaw CLI is not installed, so no turn can go through it; install it "
            "with `ark-trainer install --openclaw`, or pass --openclaw_share 0 (every turn over HTTP)"
        )
    return found


def isolated_env(out: Path, openclaw: str | None) -> dict[str, str]:
    """The loop's and the OpenClaw turns' environment: HOME and OpenClaw's state inside ``out``."""
    from ark_trainer.base.external.openclaw_cli import tools_dir

    env = {k: v for k, v in os.environ.items() if k != "OPENCLAW_CONFIG_PATH"}
    env.update(HOME=str(out / "home"), OPENCLAW_STATE_DIR=str(out / "openclaw"), ARK_TOOLS_DIR=str(tools_dir()),
               PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[2]), *sys.path]))  # fmt: skip
    if openclaw:
        env["ARK_OPENCLAW_BIN"] = openclaw
    (out / "home").mkdir(parents=True, exist_ok=True)
    (out / "openclaw").mkdir(parents=True, exist_ok=True)
    return env


def _train_flags(steps: int, batch: int, lr: float | None) -> list[str]:
    """RFT alone (all steps RFT, no GRPO), on the rows' own answers (no sampling)."""
    flags = ["--strategy", "RFT+GRPO", "--max_train_steps", str(steps), "--rft_steps", str(steps),
             "--rft_num_samples", "0", "--batch_size", str(batch), "--logging_steps", "5", "--save_steps", "100000"]  # fmt: skip
    return flags + (["--rft_learning_rate", f"{lr:g}"] if lr else [])


def build_start_model(out: Path, base: str, data: Path, sizes: Sizes, env: dict) -> Path:
    """``train`` from ``base`` on the rows without the new kind: the model the loop starts serving."""
    argv = [sys.executable, "-m", "ark_trainer", "train", "--model_path", base, "--data_path", str(data),
            "--output_dir", str(out / "start"), "--overwrite_output_dir", "True", "--openclaw_env", "False",
            "--eval_auto", "False", "--report_to", "none",
            *_train_flags(sizes.start_steps, sizes.start_batch, sizes.start_learning_rate)]  # fmt: skip
    if sizes.reply_tokens:  # recorded in the model: the loop serves and trains every round with it
        argv += ["--max_completion_length", str(sizes.reply_tokens)]
    started = time.time()
    with open(out / "start.log", "wb") as log:
        code = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=env, check=False).returncode
    model = out / "start" / "model"
    if code != 0 or not (model / "config.json").is_file():
        raise UserError(
            f"demo --task loop: the starting model's training failed (exit {code}); see {out / 'start.log'}"
        )
    say(f"starting model trained in {time.time() - started:.0f} s: {model}")
    return model


def start_loop(
    out: Path, model: Path, heldout: Path, rounds: int, sizes: Sizes, env: dict
) -> subprocess.Popen:
    argv = [sys.executable, "-m", "ark_trainer", "loop", "--output_dir", str(out / "loop"),
            "--model_path", str(model), "--eval_dataset", str(heldout), "--min_new_turns", str(sizes.min_new_turns),
            "--eval_newest", str(sizes.eval_newest), "--max_rounds", str(rounds), "--poll", "1",
            *_train_flags(sizes.round_steps, sizes.round_batch, sizes.round_learning_rate)]  # fmt: skip
    log = open(out / "loop.log", "ab")  # noqa: SIM115 - the child keeps it; closed when the process ends
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=out)


def wait_deployed(out: Path, proc: subprocess.Popen, timeout: float = 600) -> dict:
    path = out / "loop" / "deploy" / "deploy.json"
    deadline = time.time() + timeout
    while time.time() < deadline:
        record = read_json(path) if path.is_file() else None
        if record and record.get("state") == "deployed":
            return record
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    tail = (out / "loop.log").read_text(encoding="utf-8", errors="replace")[-2000:]
    raise UserError(f"demo --task loop: the loop did not start serving; {out / 'loop.log'} ends:\n{tail}")


class Users:
    """The simulated users' threads (see the module docstring), until :meth:`stop`."""

    def __init__(self, out: Path, record: dict, pool: list[dict], env: dict, poison_round: int,
                 poison_share: float, openclaw_share: float, seed: int, think_seconds: float) -> None:  # fmt: skip
        from ark_trainer.services.openclaw.shape import load_shape

        self.loop, self.env, self.ledger = out / "loop", env, Ledger()
        self.agent = HttpAgent(record, load_shape())
        self.rows, self.poison_round, self.poison_share = cycle(pool), poison_round, poison_share
        self.openclaw_share, self.seed, self.think_seconds = openclaw_share, seed, think_seconds
        self.lock, self.stopping = threading.Lock(), threading.Event()
        self.in_phase: dict[int, int] = {}
        self.kinds = cycle(POISON_KINDS)
        self.threads = [
            threading.Thread(target=self._http, args=(i,), daemon=True) for i in range(HTTP_USERS)
        ]
        if openclaw_share > 0:
            self.threads.append(threading.Thread(target=self._openclaw, daemon=True))

    def _next(self) -> tuple[dict, int, str | None]:
        """The next question, its phase (the round its turns go to) and its poison kind (None: honest):
        ``poison_share`` of the poison round's HTTP sessions, spread evenly."""
        phase = int(loop_state(self.loop).get("next_round") or 1)
        with self.lock:
            k = self.in_phase.get(phase, 0)
            self.in_phase[phase] = k + 1
            poisoned = phase == self.poison_round and int((k + 1) * self.poison_share) > int(
                k * self.poison_share
            )
            return next(self.rows), phase, next(self.kinds) if poisoned else None

    def _http(self, i: int) -> None:
        rng = random.Random(f"ark-loop-demo:user:{self.seed}:{i}")
        while not self.stopping.is_set():
            row, phase, poison = self._next()
            http_session(self.agent, row, poison, phase, self.loop, self.ledger, rng)
            self.stopping.wait(self.think_seconds)

    def _openclaw(self) -> None:
        rng, n = random.Random(f"ark-loop-demo:openclaw:{self.seed}"), 0
        while not self.stopping.is_set():
            done = self.ledger.sessions
            mine = sum(s.route == "openclaw" for s in done)
            if mine >= self.openclaw_share * max(len(done), 1):
                self.stopping.wait(0.5)
                continue
            phase = int(loop_state(self.loop).get("next_round") or 1)
            with self.lock:
                row = next(self.rows)
            n += 1
            openclaw_session(self.env, row, None, phase, self.loop, self.ledger, rng, f"demo-{n}")

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def stop(self) -> None:
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=300)


ECHOED = ("expected to take", "its cost is not measured yet", "training on", "corrections dropped", "replay:")


def wait_rounds(out: Path, proc: subprocess.Popen, rounds: int, timeout: float) -> None:
    """Until ``rounds`` rounds are decided (the supervisor then ends: ``--max_rounds``); each round's cost
    and size, said by the loop before it starts (``LOOP`` log), and its decision are echoed."""
    deadline, said, seen = time.time() + timeout, 0, 0
    while time.time() < deadline:
        lines = (out / "loop.log").read_text(encoding="utf-8", errors="replace").splitlines()
        for line in lines[seen:]:
            if line.startswith("loop: round") and any(k in line for k in ECHOED):
                say(line.removeprefix("loop: "))
        seen = len(lines)
        history = [h for h in loop_state(out / "loop").get("history") or [] if not h.get("failed")]
        for h in history[said:]:
            say(f"round {h['round']} {'promoted' if h['promoted'] else 'refused'}: {'; '.join(h['reasons'])}")
        said = len(history)
        if said >= rounds:
            return
        if proc.poll() is not None:
            raise UserError(
                f"demo --task loop: the loop ended after {said} of {rounds} rounds; see {out / 'loop.log'}"
            )
        time.sleep(1)
    raise UserError(
        f"demo --task loop: {rounds} rounds did not finish within {timeout:.0f} s; see {out / 'loop.log'}"
    )


def announce(
    paths: dict[str, Path], base: str, sizes: Sizes, rounds: int, poison_round: int, share: float
) -> None:
    """Say, before anything trains, what the gate can detect and what each part will train on."""
    from ark_trainer.data.split import DISCORDANT, mde_points

    held, dev = read_jsonl(paths["heldout"]), sizes.heldout // 2
    say(f"held-out set: {len(held)} rows ({sum(r['label'] == NEW_KIND for r in held)} of {NEW_KIND}); the gate "
        f"reads about half (the dev split, ~{dev} rows): it detects a difference of {mde_points(dev):.1f} points "
        f"in task accuracy (80% power, 5% two-sided, paired, {DISCORDANT:.0%} of prompts answered differently); "
        "the other half (test) is reported")  # fmt: skip
    start = (f"{base} + {sizes.start_steps} RFT steps (batch {sizes.start_batch}) on "
             f"{len(read_jsonl(paths['start']))} rows without {NEW_KIND}") if sizes.start_steps else base  # fmt: skip
    poison = f"; round {poison_round} poisoned in {share:.0%} of its sessions" if poison_round else ""
    say(
        f"starting model: {start}; then {rounds} rounds, each {sizes.round_steps} RFT steps (batch "
        f"{sizes.round_batch}) on {sizes.min_new_turns - sizes.eval_newest} of {sizes.min_new_turns} new turns and "
        f"as many replayed rows (the loop's default --replay_share {DEFAULT_SHARE:g}){poison}"
    )


def _load() -> float | None:
    """The 1-minute load average (the report says how busy the machine was: its times are not benchmarks)."""
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


def run_loop_demo(
    out: Path, *, seed: int = 0, rounds: int = 3, poison_share: float = 0.5, openclaw_share: float = 0.1,
    mde_points: float = TOY.mde_points, base_model: str | None = None, overwrite: bool = False,
    sizes: Sizes | None = None,
) -> dict:  # fmt: skip
    """The scenario (module docstring); returns the report's numbers (also in ``OUT/loop_report.json``)."""
    from ark_trainer.app.demo.loop_report import write_loop_report
    from ark_trainer.app.demo.run import _check_base_model, _check_demo_args, shipped_base_model
    from ark_trainer.core.folders import claim_folder

    openclaw = check_loop_demo_args(rounds, poison_share, openclaw_share, mde_points)
    _check_demo_args(out, overwrite, seed)
    if base_model is not None:
        _check_base_model(base_model)
    if sizes is None:
        sizes = replace(REAL if base_model else TOY, mde_points=mde_points)
    base = base_model or str(shipped_base_model() or "")
    if not base:
        raise UserError("demo --task loop: the toy base model is not in this installation (demo/base_model/); "
                        "give --base_model")  # fmt: skip
    if (out / "loop").exists() and overwrite:
        import shutil

        for name in ("loop", "start", "home", "openclaw"):
            shutil.rmtree(out / name, ignore_errors=True)
    elif (out / "loop").exists():
        raise UserError(
            f"--output_dir: {out} already holds a loop demo; pick a new folder or pass --overwrite_output_dir True"
        )
    claim_folder(out)
    poison_round = rounds if rounds > 1 and poison_share > 0 else 0
    n_pool = max(200, 3 * rounds * sizes.min_new_turns)
    paths = write_scenario_data(out / "data", seed, sizes.n_start, sizes.heldout, n_pool)
    announce(paths, base, sizes, rounds, poison_round, poison_share)
    env = isolated_env(out, openclaw)
    started, load = time.time(), _load()
    model = build_start_model(out, base, paths["start"], sizes, env) if sizes.start_steps else Path(base)
    proc = start_loop(out, model, paths["heldout"], rounds, sizes, env)
    users = None
    try:
        record = wait_deployed(out, proc)
        say(f"serving on port {record['port']}; users start (log: {out / 'loop.log'})")
        users = Users(
            out, record, read_jsonl(paths["pool"]), env, poison_round, poison_share, openclaw_share, seed,
            sizes.think_seconds,
        )  # fmt: skip
        users.start()
        wait_rounds(out, proc, rounds, sizes.timeout)
    finally:
        if users is not None:
            users.stop()
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=120)
        subprocess.run([sys.executable, "-m", "ark_trainer", "loop", "--output_dir", str(out / "loop"), "--stop"],
                       env=env, capture_output=True, check=False)  # fmt: skip
    settings = {"seed": seed, "rounds": rounds, "poison_round": poison_round, "poison_share": poison_share,
                "openclaw_share": openclaw_share, "base_model": base_model or "the toy (demo/base_model/)",
                "sizes": {**vars(sizes), "heldout": sizes.heldout}, "seconds": round(time.time() - started, 1),
                "load_average": [load, _load()]}  # fmt: skip
    return write_loop_report(out, settings, users.ledger.to_json() if users else {})
