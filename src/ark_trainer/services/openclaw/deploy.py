"""Serve a trained model and make it the OpenClaw agent's model; stop it; roll it back.

    ark-trainer deploy OUT [--agent ID] [--port P]     # serve OUT/model, smoke-test it, patch the config
    ark-trainer deploy --status | --stop | --rollback  # the latest deployment (or give OUT)

Order matters: the server is started and smoke-tested (streaming, a tools list, a 40k-character system
prompt: what an OpenClaw turn sends) *before* the config is touched, so a model that cannot answer
never reaches the agent.

Crash safety: before the server starts, the config's exact bytes (or its absence) and mode are saved and a
``pending`` record naming them is written (atomic writes), so a deploy killed at any point (``kill -9``)
leaves what ``--rollback`` needs to restore the config byte for byte; ``--stop``/``--rollback`` also find
a server whose deploy died before recording its pid (by its working folder, ``OUT/deploy/serve``). The
record becomes ``deployed`` only after the patched config validates. ``ARK_FAULT=deploy_kill_after:POINT``
(see :mod:`ark_trainer.core.runtime.faults`) kills the deploy at a point, for the tests.

Each deployment gets a random API key (``OUT/deploy/api_key``, 0600), written into OpenClaw's provider
entry and required by the server on every request. Files: ``OUT/deploy/`` (server.log, server.pid,
deploy.json, api_key, patch.json5 (0600: holds the key), openclaw.json.before (the config's mode),
serve/NAME -> ../../model) and ``$OPENCLAW_STATE_DIR/ark-trainer/deployments.json`` (a stack of
deployments, newest last, so ``--rollback`` without OUT undoes the latest one). The server process
itself is managed by :mod:`ark_trainer.services.deploy.process`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import signal
import urllib.error
import urllib.request
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.base.external import openclaw_cli as cli
from ark_trainer.base.fileio import (
    atomic_write_bytes,
    atomic_write_text,
    read_bounded,
    read_json,
    write_json,
)
from ark_trainer.core.runtime import faults
from ark_trainer.core.runtime.system import free_port, pid_alive
from ark_trainer.core.runtime.ticker import ticking
from ark_trainer.services.deploy.process import (
    HOST,
    check_port,
    check_serving_packages,
    find_servers,
    get_json,
    is_our_server,
    read_key,
    smoke_request,
    start_server,
    stop_server,
    wait_healthy,
)
from ark_trainer.services.deploy.targets import Serving
from ark_trainer.services.openclaw import config_edit
from ark_trainer.services.openclaw.deploy_safety import check_config_file, deploy_lock, signals_deferred
from ark_trainer.services.openclaw.homes import PROVIDER, home_file, kept_running, provider
from ark_trainer.services.openclaw.homes import shared_server as _find_shared

DEPLOY_STATES = {
    "pending": "interrupted: `ark-trainer deploy --rollback` undoes it",
    "deployed": "complete",
    "failed": "failed (the config was left as it was)",
    "rolled back": "rolled back (the config restored)",
}
OPENCLAW_MIN_CONTEXT = 4000  # measured: OpenClaw 2026.9.6 refuses a model registered below 4000 tokens


def model_window(model_dir: Path) -> int:
    """The context the model was built for: ``max_position_embeddings`` (or the tokenizer's limit if lower)."""
    config = read_json(model_dir / "config.json")
    text_config = config.get("text_config") or {}
    window = config.get("max_position_embeddings") or text_config.get("max_position_embeddings") or 2048
    tok_path = model_dir / "tokenizer_config.json"
    tok_max = read_json(tok_path).get("model_max_length") if tok_path.is_file() else None
    if isinstance(tok_max, int) and 0 < tok_max < window:
        window = tok_max
    return int(window)


def served_name(out: Path) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", out.resolve().name.lower()).strip("-") or "model"
    return (name if name.startswith("ark-") else f"ark-{name}")[:60]


def _registry() -> Path:
    return cli.state_dir() / "ark-trainer" / "deployments.json"


def _load_registry() -> list[dict]:
    path = _registry()
    return read_json(path) if path.is_file() else []


def _save_registry(items: list[dict]) -> None:
    write_json(_registry(), items)


def _check_model_dir(model_dir: Path) -> None:
    if not (model_dir / "config.json").is_file() or not list(model_dir.glob("*.safetensors")):
        raise UserError(
            f"deploy: {model_dir} holds no model (config.json + *.safetensors); give the --output_dir of a "
            "finished run"
        )
    from ark_trainer.core.models.structure import check_tokenizer_loads

    check_tokenizer_loads(model_dir)  # its chat template renders within bounds, or no server is started


def serving_knobs(shape: str | None) -> tuple[dict, dict]:
    """OpenClaw's own settings for a model that learnt ``shape``: ``(model entry fields, agent fields)``.

    A model trained on bare task prompts gets no workspace bootstrap files (``contextInjection: "never"``)
    and no tool schemas (``compat.supportsTools: false``); one trained with tools keeps the tools; a
    model trained on OpenClaw turns without the system prompt gets no bootstrap files; one trained on
    whole OpenClaw turns, OpenClaw's defaults.
    """
    model: dict[str, Any] = {"compat": {"supportsTools": False}} if shape == "bare" else {}
    agent: dict[str, Any] = (
        {"contextInjection": "never"} if shape in ("bare", "tools", "openclaw-turns") else {}
    )
    return model, agent


def knobs_said(patch: dict) -> list[str]:
    """The OpenClaw settings of ``patch`` beyond the provider and the model ref, as ``key=value``."""
    said = []
    for model in patch["models"]["providers"][PROVIDER]["models"]:
        said += (
            [f"models.providers.{PROVIDER}.models[].contextTokens={model['contextTokens']}"]
            if "contextTokens" in model
            else []
        )
        said += (
            [f"models.providers.{PROVIDER}.models[].compat.supportsTools=false"]
            if model.get("compat")
            else []
        )
    for scope, fields in patch["agents"].items():
        entries = fields.items() if scope == "entries" else [(None, fields)]
        for agent_id, agent in entries:
            where = f"agents.entries.{agent_id}" if agent_id else f"agents.{scope}"
            said += [f"{where}.{k}={json.dumps(v)}" for k, v in agent.items() if k != "model"]
    return said


def provider_patch(
    name: str,
    port: int,
    window: int,
    reply_tokens: int,
    agent: str | None,
    api_key: str,
    shape: str | None = None,
) -> dict:
    """The config patch: provider ``ark`` with the model, the agent's primary model, the shape's knobs.

    ``contextWindow`` is the model's window (OpenClaw's minimum of 4000 for a smaller one); below
    :data:`~ark_trainer.services.deploy.policy.OPENCLAW_PROMPT_WINDOW` tokens the entry also says
    ``contextTokens`` 32768, what the server accepts: it fits any prompt into the window (serving policy,
    then prompt fitting) and replies with up to ``maxTokens``. OpenClaw then budgets ``maxTokens`` for
    its own prompt instead of one token (docs/openclaw.md, "The output budget").
    """
    from ark_trainer.services.deploy.policy import OPENCLAW_PROMPT_WINDOW

    model_knobs, agent_knobs = serving_knobs(shape)
    model = {
        "id": name,
        "name": f"{name} (ark-trainer)",
        "contextWindow": max(window, OPENCLAW_MIN_CONTEXT),
        "maxTokens": reply_tokens,
        **model_knobs,
    }
    if window < OPENCLAW_PROMPT_WINDOW:
        model["contextTokens"] = OPENCLAW_PROMPT_WINDOW
    provider = {
        "baseUrl": f"http://{HOST}:{port}/v1",
        "apiKey": api_key,
        "api": "openai-completions",
        "models": [model],
    }
    ref = f"{PROVIDER}/{name}"
    agents: dict[str, Any] = (
        {"entries": {agent: {"model": {"primary": ref}, **agent_knobs}}}
        if agent
        else {"defaults": {"model": {"primary": ref}, **agent_knobs}}
    )
    return {"models": {"providers": {PROVIDER: provider}}, "agents": agents}


def _check_request(out: Path, agent: str | None) -> None:
    """Everything that can refuse a deploy, checked before anything is started or written."""
    check_serving_packages()
    _check_model_dir(out / "model")
    if agent is not None and not re.fullmatch(r"[a-z0-9_][a-z0-9_-]{0,63}", agent):
        raise UserError(
            f"--agent: {agent!r} is not an OpenClaw agent id (lowercase letters, digits, _ and -)"
        )
    for item in _load_registry():
        if item.get("state") == "pending":  # its deploy died: a live one holds the deploy lock we hold now
            raise UserError(
                f"deploy: an earlier deploy of {item['out']} did not finish; "
                "`ark-trainer deploy --rollback` undoes it first"
            )
        if Path(item["out"]) == out and _alive(item):
            raise UserError(
                f"deploy: {out} is already deployed (pid {item['pid']}); `ark-trainer deploy --rollback` first"
            )


def deploy_folder(spec: str | Path) -> Path:
    """The folder to deploy from: a run's (or loop's) ``--output_dir`` of ours as it is; a model folder given
    directly (a ``.gguf`` or ``ollama:NAME`` becomes one in ``app/commands/deploy.py: serving_folder``), or the
    ``model/`` of any other folder, gets a deploy folder of its own,
    ``$OPENCLAW_STATE_DIR/ark-trainer/models/NAME/`` with ``model`` linking to it (a folder that is not ours
    is never written to)."""
    from ark_trainer.core.folders import owned

    path = Path(spec).expanduser()
    if (path / "model").exists() and (owned(path, "run") or owned(path, "loop")):
        return path.resolve()  # a run (or loop) folder of ours: its deploy/ goes inside it
    if (path / "model" / "config.json").is_file():
        path = path / "model"  # another folder holding a model: it is served, its folder is not written to
    if not (path / "config.json").is_file():
        return Path(spec).expanduser().resolve()  # nothing to serve: _check_request says what is missing
    model_dir = path.resolve()
    out = cli.state_dir() / "ark-trainer" / "models" / served_name(model_dir).removeprefix("ark-")
    link = out / "model"
    if link.is_symlink() and Path(os.readlink(link)) == model_dir:
        return out
    if link.is_symlink() and any(Path(r["out"]) == out and _alive(r) for r in _load_registry()):
        raise UserError(f"deploy: {out} serves another model now; `ark-trainer deploy --rollback` first")
    out.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(model_dir)
    return out


CLIENT_SETTINGS = ("agent",)
"""OpenClaw's own deploy settings (``client`` of :meth:`DeployTarget.deploy`): ``agent``, the agent id whose
model it becomes (``None``: every agent, ``agents.defaults``)."""


def client_settings(client: Mapping[str, Any] | None) -> dict[str, Any]:
    """The OpenClaw settings of a deploy, refused in one line when one is not OpenClaw's."""
    client = dict(client or {})
    unknown = sorted(set(client) - set(CLIENT_SETTINGS))
    if unknown:
        raise UserError(
            f"deploy: {', '.join(unknown)} is not an OpenClaw deploy setting (it takes: {', '.join(CLIENT_SETTINGS)})"
        )
    return client


def deploy(
    out: Path, serving: Serving | None = None, client: Mapping[str, Any] | None = None, log=print
) -> dict:
    """Serve, smoke-test, patch, record; a crash at any point leaves a record ``--rollback`` undoes.

    ``out``: a run folder (serves ``OUT/model``) or a model folder (:func:`deploy_folder`). ``serving``
    (:class:`ark_trainer.services.deploy.targets.Serving`): port, recording, tag and the serving policy, whose
    ``prompt_shape`` (``auto``: the model's own) also sets OpenClaw's knobs that go with it
    (:mod:`ark_trainer.services.deploy.policy`). ``client``: OpenClaw's own settings (:data:`CLIENT_SETTINGS`).
    """

    serving = serving or Serving()
    agent = client_settings(client).get("agent")
    check_config_file(cli.config_path()[0])  # before the lock and the deploy folder: nothing made yet
    with deploy_lock(cli.state_dir()):
        return _deploy(deploy_folder(out), serving, agent, log)


def _deploy(out: Path, serving: Serving, agent: str | None, log) -> dict:
    """:func:`deploy` under the deploy lock: checked, then every step undone if anything (Ctrl-C, SIGTERM,
    a failure) stops it before it is recorded as deployed."""
    from ark_trainer.services.deploy.policy import reply_budget, shape_for

    port, record_to, tag = serving.port, serving.record_to, serving.tag
    prompt_shape, system_chars = serving.prompt_shape, serving.system_chars
    _check_request(out, agent)
    name, window = served_name(out), model_window(out / "model")
    reply_tokens = reply_budget(out / "model", window, serving.reply_tokens)
    shape = shape_for(out / "model", window, prompt_shape)
    recorded = str(Path(record_to).resolve()) if record_to else None
    policy = {"prompt_shape": prompt_shape, "system_chars": system_chars, "shape": shape.shape}
    serve_args = _serve_args(recorded, tag, policy)
    key_file = out / "deploy" / "api_key"
    shared = _find_shared(out, cli.config_path()[0], port, serve_args)
    if port and shared is None:
        check_port(port)
    started: dict[str, Any] = {}  # what this deploy has made so far, for the undo
    try:
        with signals_deferred():  # the key and the pending record are written whole or not at all
            if shared is not None:  # another OpenClaw home's deployment of OUT: its server, port and key
                port, key = shared["port"], read_key(key_file) or ""
            else:
                port = port or free_port(HOST)
                key = secrets.token_urlsafe(32)
                atomic_write_text(key_file, key + "\n", mode=0o600)
                started["key_file"] = key_file
            record = started["record"] = _intent(
                out, name, port, window, reply_tokens, agent, key_file, shared=shared is not None
            )
            _update(record, record_to=recorded, **policy, serve_args=serve_args)
        faults.deploy_point("backup")
        log(
            f"deploy: serving {out / 'model'} as {name!r} on http://{HOST}:{port}/v1 (window {window} tokens)"
        )
        if shared is not None:
            live = {"pid": shared["pid"], "host": HOST, "port": port, "log": shared["log"]}
            _update(record, pid=shared["pid"], log=shared["log"])
            log(f"deploy: sharing the model server (pid {shared['pid']}) that serves {out} for OpenClaw config "
                f"{shared['config_path']}; it keeps running until no OpenClaw config uses it")  # fmt: skip
        else:
            live = started["server"] = start_server(
                out, name, port, window, reply_tokens, key_file, serve_args
            )
            faults.deploy_point("server_started")
            _update(record, pid=live["pid"], log=live["log"])
        if shared is None:  # a real model takes seconds to minutes to load on a CPU, in silence
            log(f"deploy: starting the model server and loading the model (its log: {live['log']})")
        with ticking(log, "starting the model server and loading the model"):
            wait_healthy(live, key)
            smoke = smoke_request(f"http://{HOST}:{port}/v1", name, key)  # the first request loads it
        log(f"deploy: smoke request ok ({smoke['chunks']} streamed chunks, finish {smoke['finish_reason']})")
        faults.deploy_point("smoke")
        _patch(record, key, smoke)
        faults.deploy_point("recorded")
    except BaseException:
        with signals_deferred():  # a second Ctrl-C does not cut the undo short
            _undo(out, started, shared is not None)
        raise
    _say_policy(record, shape, log)
    log(f"deploy: OpenClaw config {record['config_path']} now uses {PROVIDER}/{name} for {record['agent']}")
    log("deploy: undo with `ark-trainer deploy --rollback`")
    return record


def _undo(out: Path, started: dict[str, Any], shared: bool) -> None:
    """Undo a deploy stopped part way: its server stopped, the config as before, its record gone (marked
    failed in OUT), its key removed."""
    record = started.get("record")
    if record is None:  # stopped before anything was recorded: only the key may be there
        if "key_file" in started:
            started["key_file"].unlink(missing_ok=True)
        return
    if not shared:
        _stop(record)  # its pid, or any server working in its folder (stopped before the pid was recorded)
    config = Path(record["config_path"])
    if _patched(record, config):  # stopped after the patch landed (a config edited meanwhile is left alone)
        before = read_bounded(record["config_backup"]) if record["config_existed"] else None
        restore_saved(config, before, record)
    _save_registry(_without(_load_registry(), record))
    home_file(out, record["config_path"]).unlink(missing_ok=True)
    if not shared:  # a shared server's deploy.json and key stay the live deployment's
        write_json(out / "deploy" / "deploy.json", {**record, "state": "failed"})
        for secret in _secrets(record):
            secret.unlink(missing_ok=True)


def _patched(record: dict, config: Path) -> bool:
    """Whether the config holds this deployment's patch: as deployed, or carrying its key."""
    if record.get("config_sha256_after") and _sha(config) == record["config_sha256_after"]:
        return True
    key = read_key(record.get("api_key_file"))
    return bool(key) and provider(config).get("apiKey") == key


def _forget(record: dict) -> None:
    """After a rollback, the deployment's key goes (``api_key``, and ``patch.json5``, which holds it too); a
    deploy folder made in OpenClaw's state for a model folder (``ark-trainer/models/NAME``) goes whole. A
    run's ``OUT/deploy/`` keeps its history: ``server.log``, ``deploy.json`` (state ``rolled back``) and
    ``openclaw.json.before``. While another OpenClaw home still has a deployment of OUT (same key), all stays."""
    import shutil

    out = Path(record["out"])
    if list((out / "deploy" / "homes").glob("*.json")) or any(
        Path(r["out"]) == out for r in _load_registry()
    ):
        return
    if out.parent == cli.state_dir() / "ark-trainer" / "models":
        shutil.rmtree(out, ignore_errors=True)
        return
    for secret in _secrets(record):
        secret.unlink(missing_ok=True)
    (out / "deploy" / "server.pid").unlink(missing_ok=True)
    deployed = out / "deploy" / "deploy.json"
    if deployed.is_file():
        write_json(deployed, {**record, "state": "rolled back"})


def _secrets(record: dict) -> list[Path]:
    """The deployment's files that hold its API key."""
    deploy_dir = Path(record["out"]) / "deploy"
    return [Path(record.get("api_key_file") or deploy_dir / "api_key"), deploy_dir / "patch.json5"]


def _say_policy(record: dict, shape, log) -> None:
    """What the model is shown of OpenClaw's turns, and what was set in OpenClaw for it."""
    window, reply_tokens = record["window"], record["reply_tokens"]
    shown = {
        "bare": "the user's messages and the conversation's turns (no tools, no OpenClaw notes"
        + (
            f", OpenClaw's system prompt cut to {record['system_chars']} chars"
            if record["system_chars"]
            else ", none of OpenClaw's system prompt"
        )
        + ")",
        "tools": "the user's messages, the conversation's turns and the tool schemas (no OpenClaw system prompt)",
        "openclaw-turns": "the conversation's turns as OpenClaw wraps them (no system prompt, no tools)",
        "openclaw": "OpenClaw's whole request",
    }[shape.shape]
    log(f"deploy: prompt shape {shape.shape} ({shape.source}): the model is shown {shown}; docs/openclaw.md")
    knobs = knobs_said(_patch_of(record, "KEY"))
    log(f"deploy: OpenClaw settings written: {', '.join(knobs) or 'none beyond the provider and the model'}")
    log(
        f"deploy: OpenClaw budgets up to {reply_tokens} reply tokens (maxTokens); the server fits each prompt "
        f"into {window - reply_tokens} of the model's {window} tokens and replies with up to {reply_tokens}"
    )


def _serve_args(record_to: str | None, tag: str, policy: dict | None = None) -> list[str]:
    args = ["--record", record_to] if record_to else []
    policy = policy or {}
    args += ["--prompt_shape", policy.get("prompt_shape") or "auto"]
    args += ["--system_chars", str(policy.get("system_chars") or 0)]
    return args + (["--tag", tag] if tag else [])


def swap(out: Path, tag: str = "", log=print) -> dict:
    """Serve what ``OUT/model`` points to now, on the same port, key, name and recording.

    The live loop's promotion and rollback: the caller has repointed ``OUT/model`` (a symlink) to a
    complete model. A running server is hot-swapped: ``.tag`` is written in its working folder and it gets
    ``SIGHUP`` (:mod:`ark_trainer.services.deploy.hotswap`: it drops the loaded model; the next request loads the
    new one), then a smoke request loads and checks the new model, so no agent request is refused and
    usually none waits. A server that is not running is started on the same port. OpenClaw's config is
    untouched either way (same provider URL, key and model id).
    """
    from ark_trainer.services.deploy.hotswap import TAG_FILE

    record, _ = find_record(str(out))
    if record.get("state") != "deployed":
        raise UserError(f"loop: {out} has no complete deployment to swap; deploy it first")
    key = read_key(record["api_key_file"]) or ""
    atomic_write_text(Path(record["serve_dir"]) / TAG_FILE, tag + "\n")
    args = _serve_args(record.get("record_to"), tag, record)
    pid = record.get("pid")
    if pid and pid_alive(pid) and is_our_server(pid):
        os.kill(pid, signal.SIGHUP)
        how = "hot-swapped"
    else:
        _stop(record)
        check_port(record["port"])
        server = start_server(
            Path(record["out"]), record["name"], record["port"], record["window"], record["reply_tokens"],
            Path(record["api_key_file"]), args,
        )  # fmt: skip
        wait_healthy(server, key)
        pid, how = server["pid"], "restarted"
    _update(record, pid=pid, serve_args=args)
    smoke_request(f"http://{HOST}:{record['port']}/v1", record["name"], key)  # loads the new model
    log(f"loop: the server on port {record['port']} now serves {tag or 'OUT/model'} ({how}, pid {pid})")
    return record


def _intent(out, name, port, window, reply_tokens, agent, key_file, shared: bool = False) -> dict:
    """Save the config's bytes (with its mode) and a ``pending`` record, durably, before anything runs.

    From here on ``--rollback`` can undo whatever a crash leaves: the backup is on disk and the record
    names it, the server's working folder and the key that marks our patch in the config.
    """
    deploy_dir = out / "deploy"
    config, source = cli.config_path()
    before = read_bounded(config) if config.is_file() else None
    mode = config.stat().st_mode & 0o777 if before is not None else None
    # The saved bytes live in OpenClaw's state folder (next to the config, survives deleting OUT) and,
    # for the user to see, in OUT/deploy/; both keep the config's mode (it holds provider API keys).
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    backup = cli.state_dir() / "ark-trainer" / "backups" / f"{stamp}-{name}.openclaw.json"
    if before is not None:
        assert mode is not None  # read together with ``before`` above
        atomic_write_bytes(backup, before, mode)
        if not shared:  # a shared server's OUT copy is the first home's; this home's is the backup above
            atomic_write_bytes(deploy_dir / "openclaw.json.before", before, mode)
    record = {
        "id": f"{stamp}-{name}-{secrets.token_hex(4)}",
        "state": "pending",
        "out": str(out),
        "name": name,
        "model_ref": f"{PROVIDER}/{name}",
        "agent": agent or "defaults",
        "host": HOST,
        "port": port,
        "pid": None,
        "log": str(deploy_dir / "server.log"),
        "serve_dir": str(deploy_dir / "serve"),
        "api_key_file": str(key_file),
        "window": window,
        "context_window": max(window, OPENCLAW_MIN_CONTEXT),
        "reply_tokens": reply_tokens,
        "config_path": str(config),
        "config_source": source,
        "config_existed": before is not None,
        "config_mode": mode,
        "config_backup": str(backup) if before is not None else None,
        "config_sha256_before": hashlib.sha256(before).hexdigest() if before is not None else None,
        "config_sha256_after": None,
    }
    _save_registry([*_load_registry(), record])
    write_json(deploy_dir / "deploy.json", record)
    write_json(home_file(out, config), record)
    return record


def _update(record: dict, **fields) -> None:
    """Change ``record`` in the registry and in OUT/deploy/deploy.json (both atomic writes)."""
    record.update(fields)
    _save_registry([record if r.get("id") == record["id"] else r for r in _load_registry()])
    write_json(Path(record["out"]) / "deploy" / "deploy.json", record)
    write_json(home_file(record["out"], record["config_path"]), record)


def _patch(record: dict, key: str, smoke: dict) -> None:
    """Patch the config (validated), then mark the record deployed; restore the saved bytes on failure."""
    config = Path(record["config_path"])
    before = read_bounded(record["config_backup"]) if record["config_existed"] else None
    patch = _patch_of(record, key)
    patch_file = Path(record["out"]) / "deploy" / "patch.json5"
    write_json(patch_file, patch, mode=0o600)  # it holds the key
    try:
        method = config_edit.apply_patch(config, patch, patch_file)
        faults.deploy_point("patched")
        config_edit.validate(config)
    except BaseException:
        with signals_deferred():
            restore_saved(config, before, record)
        raise
    _update(
        record,
        state="deployed",
        method=method,
        smoke=smoke,
        config_sha256_after=_sha(config),
        deployed_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )


def _patch_of(record: dict, key: str) -> dict:
    return provider_patch(
        record["name"], record["port"], record["window"], record["reply_tokens"],
        None if record["agent"] == "defaults" else record["agent"], key, record.get("shape"),
    )  # fmt: skip


def _sha(config: Path) -> str | None:
    return hashlib.sha256(read_bounded(config)).hexdigest() if config.is_file() else None


def _alive(record: dict) -> bool:
    return bool(record.get("pid") and pid_alive(record["pid"])) or bool(_servers(record))


def _servers(record: dict) -> list[int]:
    serve_dir = record.get("serve_dir") or str(Path(record["out"]) / "deploy" / "serve")
    return find_servers(Path(serve_dir))


def restore_config(config: Path, before: bytes | None, mode: int | None) -> None:
    """Put the config back exactly: same bytes and mode, or no file if there was none."""
    if before is None:
        config.unlink(missing_ok=True)
        return
    atomic_write_bytes(config, before, mode if mode is not None else 0o600, follow_links=True)


def restore_saved(config: Path, before: bytes | None, record: dict) -> None:
    """:func:`restore_config` for a deploy's cleanup: a config that cannot be written back is one line
    saying where its saved bytes are, not a traceback that hides why the deploy stopped."""
    try:
        restore_config(config, before, record.get("config_mode"))
    except OSError as exc:
        saved = record.get("config_backup") or "(there was no config before: delete it)"
        raise UserError(
            f"deploy: could not restore {config} ({exc.strerror or exc}); its bytes before the deploy are in "
            f"{saved}: copy them back"
        ) from None


def find_record(out: str | None) -> tuple[dict, list[dict]]:
    items = _load_registry()
    if out is not None:
        target = Path(out).resolve()
        matches = [r for r in items if Path(r["out"]) == target]
        if not matches:
            config = cli.config_path()[0]
            path = home_file(target, config)
            if path.is_file():
                return read_json(path), items
            latest = target / "deploy" / "deploy.json"  # written before per-home records
            if latest.is_file() and read_json(latest).get("config_path") == str(config):
                return read_json(latest), items
            raise UserError(f"deploy: {out} has no deployment for OpenClaw config {config} (no {path})")
        return matches[-1], items
    if not items:
        raise UserError("deploy: nothing is deployed (no ark-trainer deployments in this OpenClaw state)")
    return items[-1], items


def current(out: str | Path) -> dict | None:
    """OUT's deployment record for this OpenClaw home, or ``None`` when OUT was never deployed here."""
    try:
        return find_record(str(out))[0]
    except UserError:
        return None


def status(out: str | None) -> dict:
    record, _ = find_record(out)
    alive = _alive(record)
    healthy = False
    if alive:
        try:
            url = f"http://{record['host']}:{record['port']}/health"
            healthy = get_json(url, read_key(record.get("api_key_file"))).get("status") == "ok"
        except (urllib.error.URLError, OSError, ValueError):
            healthy = False
    config = Path(record["config_path"])
    return {
        **{
            k: record[k]
            for k in ("out", "model_ref", "agent", "host", "port", "pid", "config_path", "deployed_at")
            if k in record
        },
        "deploy": DEPLOY_STATES.get(record.get("state", "deployed"), record.get("state")),
        "server": "healthy" if healthy else ("starting or stuck" if alive else "stopped"),
        "config": "as deployed" if _sha(config) == record["config_sha256_after"] else "changed since deploy",
    }


def stop(out: str | None) -> bool:
    record, _ = find_record(out)
    kept = kept_running(record)
    if kept:
        raise UserError(f"deploy --stop: {kept}")
    return _stop(record)


def _stop(record: dict) -> bool:
    """Stop the deployment's server: the recorded pid, and any server still working in its folder
    (a deploy killed before it recorded the pid)."""
    pids = {record["pid"]} if record.get("pid") else set()
    results = [stop_server(pid) for pid in pids | set(_servers(record))]
    return any(results)


def _without(items: list[dict], record: dict) -> list[dict]:
    return [r for r in items if r is not record and not (record.get("id") and r.get("id") == record["id"])]


def _ours(record: dict, config: Path) -> bool:
    """Whether the config is what this deployment left: unchanged since the deploy, or (a deploy that
    died) still as before it or carrying this deployment's key, which nothing else can have written."""
    current = _sha(config)
    if current == record.get("config_sha256_after"):
        return True
    if record.get("state") != "pending":
        return False
    if current == record["config_sha256_before"]:
        return True
    key = read_key(record.get("api_key_file"))
    return bool(key) and provider(config).get("apiKey") == key


def rollback(out: str | None, force: bool = False) -> dict:
    """Restore the config, stop the server and forget the deployment, under the deploy lock (never while a
    deploy runs); see :func:`_forget` for what of the deployment's files goes."""
    with deploy_lock(cli.state_dir()), signals_deferred():
        return _rollback(out, force)


def _rollback(out: str | None, force: bool) -> dict:
    record, items = find_record(out)
    config = Path(record["config_path"])
    if not force and not _ours(record, config):
        raise UserError(
            f"deploy --rollback: {config} changed since the deploy; restoring it would lose those changes "
            "(pass --force to restore anyway)"
        )
    before = None
    if record["config_existed"]:
        try:
            before = read_bounded(record["config_backup"])
        except OSError as exc:
            raise UserError(
                f"deploy --rollback: the saved config {record['config_backup']} is gone ({exc})"
            ) from exc
    restore_saved(config, before, record)
    kept = kept_running(record)
    stopped = False if kept else _stop(record)
    _save_registry(_without(items, record))
    home_file(record["out"], config).unlink(missing_ok=True)
    if not kept:
        _forget(record)
    return {
        "config_path": str(config),
        "restored": "previous bytes" if before is not None else "removed (none before)",
        "server_stopped": stopped,
        **({"server_kept": kept} if kept else {}),
    }


def deploy_after_train(out: Path, info, warn) -> dict | None:
    """``train --openclaw_env True``'s last step: deploy when OpenClaw is installed; never fails the run.

    ``ARK_OPENCLAW_AUTODEPLOY=0`` turns it off (the test suite does, so that training tests start no
    servers).
    """
    if os.environ.get("ARK_OPENCLAW_AUTODEPLOY", "1") == "0":
        info("openclaw: automatic deploy is off (ARK_OPENCLAW_AUTODEPLOY=0); run `ark-trainer deploy OUT`")
        return None
    if cli.find_openclaw() is None:
        warn(
            "openclaw: CLI not found, so the model is not deployed; `ark-trainer install --openclaw`, then deploy"
        )
        return None
    try:
        return deploy(out, log=info)
    except (UserError, cli.OpenClawError) as exc:
        warn(f"openclaw: deploy failed, OpenClaw's config is unchanged: {exc}")
        return None
