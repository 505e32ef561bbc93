"""Crash-safe checkpoints and exact resume, on top of the Trainer's own checkpointing.

The transformers Trainer (5.24) already saves everything exact resume needs in ``checkpoint-N/``
(weights, optimizer, scheduler, RNG states, ``trainer_state.json`` with the step and data position) and
``trainer.train(resume_from_checkpoint=...)`` restores all of it. What it lacks, added here:

- **completeness**: it writes straight into ``checkpoint-N/`` (no temp folder, no marker), and its
  ``get_last_checkpoint`` picks the highest step even when a kill left that folder half-written. Every
  checkpoint gets ``ark_complete.json`` written last (after an fsync of every file in it); resume takes
  the newest checkpoint that has one.
- **rotation by completeness**: the Trainer's own rotation counts half-written folders and sorts by
  mtime; we turn it off and keep the newest ``--save_total_limit`` complete checkpoints ourselves, after
  the new one is marked, and delete half-written ones older than it.
- **free disk**: checked before the run starts and before each save (``--min_free_disk_gb``).

Pipeline-level resume (which stages are already done) reads ``OUT/events.jsonl``: see :class:`Progress`.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import read_json, write_json
from ark_trainer.core.runcheck import TRAINER_STATE_FIELDS, Rule, check_file, count
from ark_trainer.core.runfolder import RunFolder
from ark_trainer.core.runtime import faults

log = logging.getLogger("ark_trainer")

MARKER = "ark_complete.json"
MARKER_FIELDS: dict[str, Rule] = {"step": count}  # what mark_complete writes (and the files)
TRAINER_STATE = "trainer_state.json"  # the Trainer's own: the step and data position it resumes at
NEARLY_FULL_GB = 0.064  # a save that failed with less free than this failed for lack of disk
_CKPT = re.compile(r"^checkpoint-(\d+)$")


class TrainedStage(Protocol):
    """What the runtime is told of the stage it trains (a registered stage, ``stages/registry.py``, is one):
    the runtime never looks a stage up itself."""

    name: str  # its folder under OUT/ and its name in events.jsonl
    label: str  # for people: warnings and logs
    lr_flag: str  # the flag of its learning rate, named by the fix of a diverged stage


class DiskFullError(UserError):
    """Less free disk than ``--min_free_disk_gb``: saving now could leave nothing usable (exit 2, one line)."""


# --- checkpoints ---
def checkpoints(folder: Path) -> list[tuple[int, Path, bool]]:
    """``(step, path, complete)`` of every ``checkpoint-N`` in ``folder``, oldest first."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = []
    for p in folder.iterdir():
        m = _CKPT.match(p.name)
        if m and p.is_dir():
            # complete = marked, and holding safetensors weights (never resume from pickle weights)
            found.append((int(m.group(1)), p, (p / MARKER).is_file() and any(p.glob("*.safetensors"))))
    return sorted(found)


def latest_complete(folder: Path) -> Path | None:
    complete = [p for _, p, ok in checkpoints(folder) if ok]
    return complete[-1] if complete else None


def _fsync_tree(folder: Path) -> None:
    for p in folder.rglob("*"):
        if p.is_file():
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def mark_complete(folder: Path, step: int) -> None:
    _fsync_tree(folder)
    write_json(folder / MARKER, {"step": step, "files": sorted(p.name for p in folder.iterdir())})


def rotate(folder: Path, keep: int) -> list[Path]:
    """Keep the newest ``keep`` complete checkpoints; drop older ones and half-written ones below the newest."""
    found = checkpoints(folder)
    complete = [(s, p) for s, p, ok in found if ok]
    if not complete:
        return []
    newest = complete[-1][0]
    doomed = [p for s, p, ok in found if not ok and s < newest]
    if keep > 0:
        doomed += [p for _, p in complete[:-keep]]
    for p in doomed:
        shutil.rmtree(p, ignore_errors=True)
    return doomed


# --- disk ---
def free_gb(path: Path) -> float:
    path = Path(path)
    while not path.exists():
        path = path.parent
    return shutil.disk_usage(path).free / 1e9


def check_disk(path: Path, min_gb: float, what: str, stage: str = "", step: int = -1) -> None:
    free = 0.0 if faults.fires(stage, "disk_full_at_step", step) else free_gb(path)
    if min_gb > 0 and free < min_gb:
        raise DiskFullError(
            f"{what}: only {free:.2f} GB free on {path} (< --min_free_disk_gb {min_gb:g}); free some disk, "
            "lower --save_total_limit or point --output_dir elsewhere, then rerun with --resume True"
        )


def _disk_full(exc: BaseException, folder: Path) -> bool:
    """ENOSPC, however the writer reports it: torch.save turns it into RuntimeErrors without an errno
    (``basic_ios::clear``, ``unexpected pos``), so a save that failed on a (nearly) full disk counts too."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return "no space left" in str(exc).lower() or free_gb(folder) < NEARLY_FULL_GB


# --- the trainer ---
def harden(trainer, stage: str, min_free_gb: float, keep: int) -> None:
    """Make ``trainer``'s checkpoints crash-safe: disk check, marker written last, rotation by completeness.

    ``keep`` is ``--save_total_limit``: the trainer's own setting is turned off here.
    """
    trainer.args.save_total_limit = (
        None  # our rotation replaces the Trainer's (which counts half-written ones)
    )
    original = trainer._save_checkpoint
    run_dir = Path(trainer.args.output_dir)

    def _save_checkpoint(model, trial, *args: Any, **kwargs: Any):
        step = trainer.state.global_step
        check_disk(run_dir, min_free_gb, f"checkpoint-{step}", stage, step)
        try:
            result = original(model, trial, *args, **kwargs)
        except (OSError, RuntimeError) as exc:
            if not _disk_full(exc, run_dir):
                raise
            newest = latest_complete(run_dir)
            raise DiskFullError(
                f"checkpoint-{step}: disk full while saving ({exc}); that folder is incomplete and will be "
                f"ignored, the newest complete checkpoint is {newest.name if newest else 'none'}; free some "
                "disk, then rerun with --resume True"
            ) from None
        folder = run_dir / f"checkpoint-{step}"
        if faults.fires(stage, "kill_in_save", step):
            faults.kill_now()
        if folder.is_dir() and trainer.args.should_save:  # the main process only, under a multi-GPU launch
            mark_complete(folder, step)
            rotate(run_dir, keep)
        return result

    trainer._save_checkpoint = _save_checkpoint


@dataclass(frozen=True)
class AttemptSettings:
    """What :func:`run_trainer` reads: ``--resume``, ``--max_bad_steps``, ``--max_rollbacks``,
    ``--min_free_disk_gb`` and ``--save_total_limit``."""

    resume: bool
    max_bad_steps: int
    max_rollbacks: int
    min_free_disk_gb: float
    save_total_limit: int


def run_trainer(make_trainer, settings: AttemptSettings, monitor, trained: TrainedStage, out_dir: Path):
    """Train the stage's trainer (``make_trainer()`` builds it), resumed from the newest complete checkpoint
    under ``--resume``, with the guards; returns the trainer that finished. ``trained`` is the stage.

    ``--max_bad_steps`` non-finite steps in a row roll the stage back: a fresh trainer resumes from the
    newest complete checkpoint (or starts over) at half the learning rate, up to ``--max_rollbacks`` times
    (``ark_trainer.core.runtime.bad_steps``); then :class:`~ark_trainer.core.runtime.guards.TrainingDiverged` ends it (exit 2).
    """
    from ark_trainer.core.runtime.bad_steps import ROLLBACK_LR_FACTOR, BadStreak, step_guard

    stage = trained.name
    guard = step_guard(monitor, stage, settings.max_bad_steps)
    fault = faults.fault_callback(stage)  # one per stage: a fault that fired stays fired after a rollback
    ckpt = latest_complete(out_dir) if settings.resume else None
    if ckpt is not None:
        check_loadable(ckpt)
        step = read_json(ckpt / MARKER)["step"]
        monitor.event("resume", stage=stage, checkpoint=str(ckpt), step=step)
        log.info("%s: resuming from %s (step %d)", stage, ckpt, step)
    factor, attempt = 1.0, 0
    while True:
        trainer = _prepared(make_trainer(), settings, monitor, trained, (guard, fault), factor)
        try:
            trainer.train(resume_from_checkpoint=str(ckpt) if ckpt else None)
        except BadStreak as bad:
            streak, base_lr, precision = (
                bad.with_traceback(None),
                trainer.args.learning_rate,
                _precision(trainer),
            )
        else:
            check_disk(out_dir, settings.min_free_disk_gb, f"{stage} final model")  # the stage saves it next
            return trainer
        del trainer  # before the next one loads (GPU memory)
        _free_memory()
        if attempt == settings.max_rollbacks:
            _diverged(monitor, trained, streak, base_lr * factor, precision, settings.max_rollbacks)
        attempt, factor = attempt + 1, factor * ROLLBACK_LR_FACTOR
        ckpt = _roll_back(
            monitor, stage, attempt, streak, base_lr * factor, precision, settings.max_rollbacks, out_dir
        )


def _roll_back(
    monitor, stage: str, attempt: int, bad, lr: float, precision: str, max_rollbacks: int, out_dir: Path
):
    """Record rollback ``attempt`` to the newest complete checkpoint (None: the stage's start); return it."""
    ckpt = latest_complete(out_dir)
    step = read_json(ckpt / MARKER)["step"] if ckpt else 0
    monitor.event(
        "rollback", stage=stage, attempt=attempt, at_step=bad.step, to_step=step,
        checkpoint=str(ckpt) if ckpt else None, learning_rate=lr, precision=precision,
    )  # fmt: skip
    log.warning(
        "%s: %d bad steps in a row up to step %d (%s); rollback %d of %d to step %d with learning rate %g",
        stage, bad.streak, bad.step, precision, attempt, max_rollbacks, step, lr,
    )  # fmt: skip
    return ckpt


def _prepared(
    trainer, settings: AttemptSettings, monitor, trained: TrainedStage, callbacks: tuple, factor: float
):
    """``trainer`` with crash-safe saves, console progress, faults, guards and (after a rollback) a lower LR."""
    from ark_trainer.core.runtime.bad_steps import lower_lr_callback
    from ark_trainer.core.runtime.guards import guard_callbacks
    from ark_trainer.core.runtime.monitor import use_console_progress

    guard, fault = callbacks
    harden(trainer, trained.name, settings.min_free_disk_gb, settings.save_total_limit or 0)
    use_console_progress(trainer, trained.name)
    for cb in ([fault] if fault else []) + guard_callbacks(monitor, trained.label):
        trainer.add_callback(cb)
    guard.attach(trainer)
    if factor != 1.0:
        trainer.add_callback(lower_lr_callback(trainer.args.learning_rate, factor))
    return trainer


def _precision(trainer) -> str:
    from ark_trainer.core.runtime.bad_steps import precision_of

    return precision_of(trainer.args, trainer.model)


def _free_memory() -> None:
    """Drop a trainer that is being rolled back before the next one loads (GPU memory)."""
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _diverged(monitor, trained: TrainedStage, bad, lr: float, precision: str, max_rollbacks: int) -> None:
    """Stop the stage after the last rollback: one line naming the precision and the flags to change."""
    from ark_trainer.core.runtime.bad_steps import precision_fix
    from ark_trainer.core.runtime.guards import TrainingDiverged

    stage = trained.name
    message = (
        f"{stage} step {bad.step}: {bad.what} was NaN/inf on {bad.streak} steps in a row (each skipped) "
        f"after {max_rollbacks} rollback(s) to the last checkpoint at lower learning rates (last "
        f"{lr:g}); precision in use: {precision}. Lower --{trained.lr_flag}"
        f"{precision_fix(precision)}, check the data for extreme examples, or raise --max_bad_steps / "
        "--max_rollbacks; the stages that finished are in the report"
    )
    monitor.event("diverged", stage=stage, step=bad.step, precision=precision, message=message)
    raise TrainingDiverged(message)


def check_loadable(ckpt: Path) -> None:
    """Every state file of ``ckpt`` loads safely (torch ``weights_only``, JSON), or one UserError line.

    A tampered or corrupt ``optimizer.pt`` / ``rng_state.pth`` / ``trainer_state.json`` would otherwise
    stop the run with the loader's traceback (whose advice, turning the safe loader off, is never ours).
    ``mmap`` maps the tensors instead of reading them, so the check costs little even for a big optimizer.
    """

    import torch
    from transformers.trainer_pt_utils import safe_globals  # the numpy types the Trainer itself allows

    for path in sorted(ckpt.iterdir()):
        try:
            if path.suffix in (".pt", ".pth"):
                with safe_globals():
                    torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            elif path.suffix == ".json":
                read_json(path)
        except RecursionError:
            fix = f"delete the folder {ckpt} to resume from the one before it"
            raise UserError(f"--resume: {path}: nested deeper than any checkpoint file; {fix}") from None
        except Exception as exc:  # noqa: BLE001 - any failure means the file cannot be trusted
            raise UserError(
                f"--resume: {path}: cannot be loaded safely ({type(exc).__name__}); delete the folder "
                f"{ckpt} to resume from the checkpoint before it, or start over with --overwrite_output_dir True"
            ) from None

    check_trainer_state(ckpt)


def check_trainer_state(ckpt: Path) -> None:
    """``trainer_state.json`` and our marker of ``checkpoint-N`` both say step N, and the Trainer's counts
    are whole numbers >= 0: it continues from its ``global_step`` (an edited -7 saved checkpoint--1 ...
    checkpoint--6), and the ``resume`` event takes the marker's."""
    fix = f"delete the folder {ckpt} to resume from the checkpoint before it"
    step = int(ckpt.name.removeprefix("checkpoint-"))  # checkpoints() matched it
    for name, fields, key in (
        (TRAINER_STATE, TRAINER_STATE_FIELDS, "global_step"),
        (MARKER, MARKER_FIELDS, "step"),
    ):
        path = ckpt / name
        if not path.is_file():
            raise UserError(f"--resume: {path}: missing; {fix}")
        state = check_file(read_json(path), f"--resume: {path}", fields, (key,), fix)
        if state[key] != step:
            raise UserError(
                f"--resume: {path}: {key}: {state[key]} is not {step}, the step of {ckpt.name}; {fix}"
            )


def check_checkpoints(out: Path, stage_names: Sequence[str]) -> None:
    """Under ``--resume``, before anything is written: the checkpoint each stage would resume from loads
    safely and says its own step, and the run folder's files that decide what the resume does and which
    model ships (the events, the eval files, the final-model record) hold nothing a run never writes."""
    for stage in stage_names:
        ckpt = latest_complete(Path(out) / stage)
        if ckpt is not None:
            check_loadable(ckpt)
    folder = RunFolder(out)
    folder.events()
    folder.evals(folder.eval_names())
    folder.final_model()


# --- pipeline level ---
# Flags that may differ between a run and its resume (resources, not what is trained).
MAY_CHANGE = {
    "batch_size",
    "gradient_accumulation_steps",
    "stall_timeout",
    "reward_timeout",
    "min_free_disk_gb",
    "max_bad_steps",
    "max_rollbacks",
    "heartbeat_interval",
    "auto_heartbeat",
    "log_dir",
    "overwrite_output_dir",
    "device",
    "fp16",
    "bf16",
    "report_to",
    "deploy_if_not_better",
    "final_model",  # which finished stage's model OUT/model is: chosen again at the end of every attempt
}
# Flags that name a file or folder: the same one spelled another way (``./d.jsonl``, ``d.jsonl``, its absolute
# path, through a symlink, ``~/``) is the same setting.
PATH_FLAGS = {"output_dir", "data_path", "model_path", "reward_config", "rm_model_path", "accelerate_config"}


def _real(value: str) -> str:
    return os.path.realpath(os.path.expanduser(value))


def same_setting(key: str, before: Any, now: Any) -> bool:
    """Whether a flag's value now is the one ``run.yaml`` holds; path flags compare the paths they resolve to."""
    if now == before:
        return True
    if key in PATH_FLAGS and isinstance(before, str) and isinstance(now, str) and before and now:
        return _real(before) == _real(now)
    return False


class ResumableStage(Protocol):
    """What the resume check is told of each registered stage (``stages/registry.py``)."""

    name: str
    steps_flag: str | None  # and, where it chooses some of its flags itself, ``auto_flags``


def check_resume(
    resume: bool, flags: dict[str, Any], flags_class: type, out: Path, stages: Sequence[ResumableStage]
) -> bool:
    """Decide whether this run continues the one in ``out`` (the caller builds its config with
    ``resume=True`` then), or raise UserError. ``resume``: ``--resume``; ``flags``: every other flag of this
    run by name (what its ``run.yaml`` holds: ``--overwrite_output_dir`` and the rest, compared with the
    earlier run's), of the config class ``flags_class`` (the earlier ``run.yaml`` is read as one); ``stages``: every
    stage a run may have.

    The strategy and steps of a resumed run come from its saved ``plan.json`` (``planning.prepare``), so an
    auto run whose probe already chose is not probed again.
    """
    from ark_trainer.core.config import load_yaml_config

    now = flags
    run_yaml = RunFolder(out).config_path
    if not run_yaml.is_file():
        if resume:
            raise UserError(f"--resume: {out} holds no run (run.yaml) to resume; drop --resume to start one")
        return False
    if flags.get("overwrite_output_dir") and not resume:
        return False
    before = load_yaml_config(flags_class, str(run_yaml))
    from ark_trainer.core.auto_defaults import AUTO_FLAGS as SHARED_AUTO_FLAGS
    from ark_trainer.core.runtime.estimate import budget_sized

    auto_flags = {*SHARED_AUTO_FLAGS, *(f for s in stages for f in getattr(s, "auto_flags", ()))}
    changed = sorted(
        k
        for k, v in before.items()
        if k not in MAY_CHANGE
        and not same_setting(k, v, now.get(k))
        and not (k in auto_flags and now.get(k) is None)
        and not budget_sized(k, before, now)
    )  # an automatic flag (or a step count --time_budget sized) left unset again: run.yaml holds the choice
    if not resume and (changed or not Progress(out).anything_done([s.name for s in stages])):
        raise UserError(
            f"--output_dir: {out} already holds a run (run.yaml); pick a new folder, pass "
            "--overwrite_output_dir True, or --resume True to continue it"
        )
    if changed:
        raise UserError(
            *(f"--resume: --{k}: {now.get(k)!r} differs from {before[k]!r} in {run_yaml}" for k in changed)
        )
    return True  # run_train logs it once logging is set up


class Progress:
    """What an earlier attempt of this run finished, read from ``OUT/events.jsonl`` and the files."""

    def __init__(self, out: Path) -> None:
        self.folder = RunFolder(out)
        self.out = self.folder.out
        self.events = self.folder.events()  # a kill mid-line leaves a torn last line; the complete ones count

    def stage_ok(self, stage: str) -> bool:
        return any(
            e.get("event") == "stage_end" and e.get("stage") == stage and e.get("status") == "ok"
            for e in self.events
        )

    def has(self, event: str) -> bool:
        return any(e.get("event") == event for e in self.events)

    def anything_done(self, stage_names: Sequence[str]) -> bool:
        """A checkpoint of any of ``stage_names``, or any stage that ended well."""
        if any(latest_complete(self.out / s) for s in stage_names):
            return True
        return any(e.get("event") == "stage_end" and e.get("status") == "ok" for e in self.events)

    def eval_result(self, name: str) -> dict | None:
        return (self.folder.eval(name) or None) if self.stage_ok(f"eval_{name}") else None

    def model_done(self, stage: str, folder: Path) -> bool:
        return self.stage_ok(stage) and (folder / "model.safetensors").is_file()
