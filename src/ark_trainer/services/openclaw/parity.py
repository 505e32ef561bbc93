"""Parity: a run's held-out set asked through the model server in the request shape OpenClaw sends.

    ark-trainer eval OUT --through openclaw [--stage grpo] [--limit 100]

The run's bare evaluation (``OUT/eval/<stage>.json``) asks the model each held-out prompt alone. In
OpenClaw the same model gets OpenClaw's request: a ~40k-character system prompt, 12 tool schemas, the
message wrapped as ``[date] message`` with a runtime note, an internal-context note after it. This
evaluation sends each held-out prompt to the served model in that request (recorded from a real
``openclaw agent --local`` turn, :mod:`ark_trainer.services.openclaw.shape`), streamed as OpenClaw streams it,
with the ``max_completion_tokens`` OpenClaw asks for under the provider entry deploy writes; the server
applies its serving policy (:mod:`ark_trainer.services.deploy.policy`) exactly as for a real turn. The answers are
scored by the run's own reward and metrics (:mod:`ark_trainer.stages.evaluate`), written to
``OUT/eval/<stage>-openclaw.json`` with the same metric names, next to the bare metrics on the same
prompts and the gap.

The server is the run's live deployment when it serves that model, else one started for the evaluation
(as deploy starts it, same policy) and stopped afterwards. OpenClaw's config is never touched.
"""

from __future__ import annotations

import json
import secrets
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import atomic_write_text, read_json, write_json
from ark_trainer.core.runfolder import PLAN, RUN_CONFIG, RunFolder
from ark_trainer.stages.report.parity import METRICS, fmt_metric

# answers to single requests (an agent run's episodes are not asked through OpenClaw: no task_success)


def stage_model(out: Path, stage: str | None) -> tuple[str, Path]:
    """``(stage, model folder)``: the named stage's model, by default the run's final one."""
    stages = [s["name"] for s in RunFolder(out).planned_stages() if s.get("steps", 0) > 0]
    final = stages[-1] if stages else None
    stage = stage or final
    if stage is None:
        raise UserError(f"eval: {out} holds no trained stage ({PLAN}); give --stage")
    if stage == "base":  # a GGUF or ollama:NAME was converted into OUT/base_model: that folder is the model
        converted = RunFolder(out).base_model_dir
        if (converted / "config.json").is_file():
            return stage, converted
        folder = Path(str(_run_config(out).get("model_path")))
        if not (folder / "config.json").is_file():
            raise UserError(
                f"--stage: base: no model folder at {folder} (run.yaml's model_path) nor at {converted}; "
                "train the run again, or give a trained --stage"
            )
        return stage, folder
    folder = RunFolder(out).model_dir if stage == final else out / stage / "final"
    if not (folder / "config.json").is_file():
        raise UserError(
            f"--stage: {stage}: no model at {folder}; the stages of this run: base, {', '.join(stages)}"
        )
    return stage, folder


def _run_config(out: Path) -> dict:
    from ark_trainer.core.config import load_yaml_config
    from ark_trainer.stages.registry import config_class

    path = RunFolder(out).config_path
    if not path.is_file():
        raise UserError(f"eval: {out} is not a run folder (no {RUN_CONFIG}); give a train run's --output_dir")
    return load_yaml_config(config_class(), str(path))


def eval_rows(out: Path, config: dict) -> list[dict]:
    from ark_trainer.data.loader import load_jsonl, resolve_eval_path

    path = RunFolder(out).test_rows_file()  # the rows of eval/<stage>.json's answers
    if not path.is_file() and config.get("eval_dataset"):
        path = resolve_eval_path(str(config["eval_dataset"]))
    if not path.is_file():
        raise UserError(f"eval: {out} has no held-out set ({path})")
    return load_jsonl(path, "--eval_dataset")


def openclaw_messages(shape: dict, prompt: list[dict], model: str) -> dict:
    """The request OpenClaw sends for this held-out prompt: its last user message as the message, the
    earlier turns (not the row's own system prompt, which OpenClaw would not carry) before it."""
    from ark_trainer.services.openclaw.shape import turn_request

    users = [i for i, m in enumerate(prompt) if m["role"] == "user"]
    last = users[-1]
    body = turn_request(shape, prompt[last]["content"], model)
    history = [m for m in prompt[:last] if m["role"] in ("user", "assistant")]
    messages = body["messages"]
    at = 1 if messages and messages[0].get("role") == "system" else 0
    body["messages"] = messages[:at] + history + messages[at:]
    return body


def ask(base_url: str, key: str, body: dict, timeout: float = 600) -> str:
    """The streamed answer's text, tool calls as their ``<tool_call>`` text (what the model wrote)."""
    from ark_trainer.base.chat.toolcall import format_tool_calls
    from ark_trainer.services.deploy.record import reply_of

    req = urllib.request.Request(
        f"{base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}", "X-Ark-Smoke": "1"},
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            text, calls = reply_of(resp.read(), True)
    except urllib.error.HTTPError as exc:
        from ark_trainer.services.deploy.process import server_said

        raise UserError(
            f"eval --through openclaw: the model server at {base_url} answered {server_said(exc)}"
        ) from exc
    return "\n".join(t for t in (text, format_tool_calls(calls) if calls else "") if t)


class _Server:
    """The run's live deployment of ``model_dir``, or a server started like deploy's for this evaluation."""

    def __init__(self, out: Path, stage: str, model_dir: Path, log, prompt_shape: str = "auto") -> None:
        self.out, self.stage, self.model_dir, self.log = out, stage, model_dir, log
        self.prompt_shape = prompt_shape
        self.fallback_reply: int | None = None  # for a model folder with no recorded answer length
        self.server: dict | None = None
        self.dtype = "auto"  # what the server loads the model in (deploy/precision.py)

    def __enter__(self) -> tuple[str, str, str, int]:
        """``(base_url, key, model id, reply tokens)``."""
        from ark_trainer.services.deploy.process import HOST, read_key

        live = self._live() if self.prompt_shape == "auto" else None
        if live is not None:
            self.log(f"eval: through the live deployment on port {live['port']}")
            key = read_key(live["api_key_file"]) or ""
            from ark_trainer.services.deploy.precision import serving_dtype

            self.dtype = serving_dtype(self.model_dir)[0]  # as deploy's server chose it, from the folder
            return f"http://{HOST}:{live['port']}/v1", key, live["name"], live["reply_tokens"]
        try:
            return self._start()
        except BaseException:  # Ctrl-C or SIGTERM while it starts: __exit__ is not called for __enter__
            self.__exit__()
            raise

    def _live(self) -> dict | None:
        from ark_trainer.services.openclaw.deploy import status

        if self.model_dir.resolve() != RunFolder(self.out).model_dir.resolve():
            return None
        try:
            if status(str(self.out)).get("server") != "healthy":
                return None
        except UserError:
            return None
        return read_json(self.out / "deploy" / "deploy.json")

    def _start(self) -> tuple[str, str, str, int]:
        from ark_trainer.core.runtime.system import free_port
        from ark_trainer.services.deploy.policy import read_shape, reply_budget
        from ark_trainer.services.deploy.process import HOST, start_server, wait_healthy
        from ark_trainer.services.openclaw.deploy import model_window, served_name

        folder = RunFolder(self.out).eval_dir / "openclaw-serve" / self.stage
        link = folder / "model"
        folder.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(self.model_dir.resolve())
        window = model_window(self.model_dir)
        self.dtype = self._dtype()
        reply_tokens = reply_budget(self.model_dir, window)  # as deploy registers maxTokens
        if read_shape(self.model_dir) is None and self.fallback_reply:  # the base model: its eval's budget
            reply_tokens = self.fallback_reply
        key, port, name = secrets.token_urlsafe(24), free_port(HOST), served_name(self.out)
        key_file = folder / "deploy" / "api_key"
        atomic_write_text(key_file, key + "\n", mode=0o600)
        self.server = server = start_server(
            folder,
            name,
            port,
            window,
            reply_tokens,
            key_file,
            ["--prompt_shape", self.prompt_shape, "--dtype", self.dtype],
            owner=True,
        )
        self.log(f"eval: started a model server for {self.model_dir} on port {port} (log {server['log']})")
        from ark_trainer.core.runtime.ticker import ticking

        with ticking(self.log, "starting the model server"):
            wait_healthy(server, key)
        return f"http://{HOST}:{port}/v1", key, name, reply_tokens

    def _dtype(self) -> str:
        """The dtype of the bare evaluation this one is compared with (its ``eval/<stage>.json``, else the
        run's precision in ``plan.json``, for a run that recorded no dtype), else the server's own choice
        (``services/deploy/precision.py``)."""
        from ark_trainer.services.deploy.precision import AUTO, DTYPES, dtype_of_precision

        folder = RunFolder(self.out)
        bare = folder.eval(self.stage).get("dtype")
        bare = bare if bare in DTYPES else dtype_of_precision(folder.plan().get("precision"))
        return bare or AUTO

    def __exit__(self, *exc) -> None:
        from ark_trainer.services.deploy.process import stop_owned

        if self.server is not None:
            stop_owned(self.server)
            self.server = None


def _bare_metrics(out: Path, stage: str, rows, reward, pass_threshold: float, base_totals) -> dict | None:
    """The bare evaluation's metrics on the same prompts, re-scored from its stored answers."""
    from ark_trainer.core.metrics import compute_metrics
    from ark_trainer.rewards.scoring import metric_scores

    folder = RunFolder(out)
    if not folder.eval_path(stage).is_file():
        return None
    answers = [a["completion"] for a in folder.eval(stage).get("answers") or []][: len(rows)]
    if len(answers) != len(rows):
        return None
    table = metric_scores(reward, rows, answers)
    return compute_metrics(table, base_totals or table["total"], pass_threshold)


def _base_totals(out: Path, rows, reward) -> list | None:
    from ark_trainer.rewards.scoring import metric_scores

    folder = RunFolder(out)
    if not folder.eval_path("base").is_file():
        return None
    answers = [a["completion"] for a in folder.eval("base").get("answers") or []][: len(rows)]
    return metric_scores(reward, rows, answers)["total"] if len(answers) == len(rows) else None


def evaluate_through_openclaw(
    out: Path, stage: str | None = None, limit: int | None = None, log=print, prompt_shape: str = "auto"
) -> dict:
    """Ask the held-out set through the served model in OpenClaw's request shape; write and return the
    result (``OUT/eval/<stage>-openclaw.json``; with a ``prompt_shape`` other than the model's own, a server
    started with that policy and ``OUT/eval/<stage>-openclaw-as-<shape>.json``, which the report leaves out)."""
    from ark_trainer.core.metrics import OUTCOMES, compute_metrics, prompt_outcomes
    from ark_trainer.rewards.builder import build_reward
    from ark_trainer.rewards.scoring import metric_scores
    from ark_trainer.services.deploy.policy import shape_for, system_prompt_seen
    from ark_trainer.services.openclaw.deploy import model_window
    from ark_trainer.services.openclaw.shape import load_shape

    out = Path(out).resolve()
    config = _run_config(out)
    if config.get("env"):
        raise UserError(
            "eval --through openclaw: an agent run (--env) is evaluated by episodes; not supported yet"
        )
    stage, model_dir = stage_model(out, stage)
    rows = eval_rows(out, config)[: limit or None]
    shape = load_shape()
    reward = build_reward(config, rows, "cpu")
    pass_threshold = float(config.get("pass_threshold", 0.5) or 0.5)
    policy = shape_for(model_dir, model_window(model_dir), prompt_shape)
    answers = []
    server = _Server(out, stage, model_dir, log, prompt_shape)
    server.fallback_reply = int(config.get("max_completion_length") or 0) or None
    with server as (base_url, key, name, reply_tokens):
        for i, row in enumerate(rows):
            body = openclaw_messages(shape, row["prompt"], name)
            body["max_completion_tokens"] = reply_tokens  # what OpenClaw asks under deploy's entry
            answers.append(ask(base_url, key, body))
            if (i + 1) % 25 == 0 or i + 1 == len(rows):
                log(f"eval {stage} through openclaw: {i + 1}/{len(rows)}")
    table = metric_scores(reward, rows, answers)
    base_totals = _base_totals(out, rows, reward)
    metrics = compute_metrics(table, base_totals or table["total"], pass_threshold)
    bare = _bare_metrics(out, stage, rows, reward, pass_threshold, base_totals)
    result: dict[str, Any] = {
        "name": f"{stage}-openclaw",
        "model": str(model_dir),
        "through": "openclaw",
        "request_shape": {k: shape.get(k) for k in ("openclaw", "recorded_at", "how")},
        "prompt_shape": policy.to_json(),
        "system_prompt": system_prompt_seen(policy, [r["prompt"] for r in rows]),
        "dtype": server.dtype,  # "auto": the weights' own
        **metrics,
        "bare": {k: bare.get(k) for k in ("n", *METRICS)} if bare else None,
        "gap": gap(metrics, bare) if bare else None,
        "examples": [
            {"prompt": r["prompt"][-1]["content"], "completion": a, "reward": t}
            for r, a, t in list(zip(rows, answers, table["total"], strict=True))[:5]
        ],  # fmt: skip
        "answers": [
            {"completion": a, "reward": t, OUTCOMES: o}
            for a, t, o in zip(
                answers,
                table["total"],
                prompt_outcomes(table, base_totals or table["total"], pass_threshold),
                strict=True,
            )
        ],
    }
    suffix = "" if prompt_shape == "auto" else f"-as-{prompt_shape}"
    result["name"] += suffix
    write_json(RunFolder(out).eval_path(f"{stage}-openclaw{suffix}"), result)
    for line in table_lines(result):
        log(line)
    return result


def gap(through: dict, bare: dict) -> dict:
    """Through OpenClaw minus bare, per metric (points of a rate as fractions; None where either is)."""
    return {
        k: round(through[k] - bare[k], 4)
        if isinstance(through.get(k), float | int) and isinstance(bare.get(k), float | int)
        else None
        for k in METRICS
    }


def table_lines(result: dict) -> list[str]:
    """The side-by-side table as text lines (the report renders the same rows)."""
    bare = result.get("bare") or {}
    lines = [f"{'metric':22} {'bare':>9} {'openclaw':>9} {'gap':>8}   (n={result['n']}, {result['name']})"]
    for k in METRICS:
        b, o, g = bare.get(k), result.get(k), (result.get("gap") or {}).get(k)
        lines.append(f"{k:22} {fmt_metric(k, b):>9} {fmt_metric(k, o):>9} {fmt_metric(k, g, sign=True):>8}")
    seen = result.get("system_prompt") or {}
    if seen.get("note"):
        lines.append(f"system prompt: {seen['note']}")
    return lines
