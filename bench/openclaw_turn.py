"""Time per ``openclaw agent --local`` turn answered by a deployed SmolLM2-135M-Instruct, before and after
the serving policy, with OpenClaw's own overhead measured apart.

Three setups, each a fresh OpenClaw state, ``--turns`` turns each ("What is the capital of France?", then
"And of Italy?" in the same session):

1. **before**: ``deploy --prompt_shape openclaw`` (what deploy did before the serving policy: OpenClaw's
   whole request, fitted into the model's 8k window; no OpenClaw knobs);
2. **after**: plain ``deploy`` (the base model has no recorded shape and an 8k window: ``bare``, with
   ``contextInjection: "never"`` and ``compat.supportsTools: false``);
3. **OpenClaw alone**: the same turn against a stdlib server that answers "ok" at once
   (``ark_trainer/services/openclaw/shape.py: CaptureServer``): OpenClaw's own time per turn.

Each turn's wall time, its CPU time (the agent process's children: OpenClaw's Node), the tokens the server
prefilled and generated (its ``[ark serve] turn:`` log lines) and the 1-minute load average before and
after are written to ``bench/results/openclaw_turn.{md,json}``.

    python bench/openclaw_turn.py [--model /work/models/smollm2-hf] [--turns 2]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import src_env, write_results  # noqa: E402

QUESTIONS = ["What is the capital of France?", "And of Italy?"]
TURN_LINE = re.compile(
    r"\[ark serve\] turn: asked max_completion_tokens=(\d+); prompt (\d+) tokens, reply (\d+) tokens"
)


def _load() -> float:
    return os.getloadavg()[0]


def _agent_turn(env: dict, message: str, session: str) -> dict:
    from ark_trainer.base.external import openclaw_cli as cli

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load, t0 = _load(), time.perf_counter()
    reply = cli.run_json(
        ["agent", "--local", "--json", "--timeout", "600", "--session-id", session, "--message", message],
        timeout=700,
        env=env,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    text = "".join(p.get("text") or "" for p in reply.get("payloads") or []).strip()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"message": message, "answer": text[:200], "wall_s": round(wall, 1), "openclaw_cpu_s": round(cpu, 1),
            "load_before": round(load, 2), "load_after": round(_load(), 2)}  # fmt: skip


def _deployed(model: str, shape: str, turns: int, root: Path) -> list[dict]:
    state = root / f"state-{shape}"
    env = {**os.environ, **src_env(), "OPENCLAW_STATE_DIR": str(state), "HOME": str(root)}
    env.pop("OPENCLAW_CONFIG_PATH", None)
    run = [sys.executable, "-m", "ark_trainer", "deploy", model]
    subprocess.run(
        [*run, "--prompt_shape", shape], env=env, check=True, capture_output=True, text=True, timeout=900
    )
    deployments = json.loads((state / "ark-trainer" / "deployments.json").read_text())
    log = Path(deployments[-1]["log"])
    try:
        rows = []
        for i, q in enumerate(QUESTIONS[:turns]):
            row = _agent_turn({"OPENCLAW_STATE_DIR": str(state), "HOME": str(root)}, q, f"bench-{shape}")
            served = [tuple(map(int, m.groups())) for m in TURN_LINE.finditer(log.read_text())]
            asked, prompt, reply = served[-1]
            rows.append({**row, "turn": i + 1, "asked_max_completion_tokens": asked, "prefill_tokens": prompt,
                         "reply_tokens": reply})  # fmt: skip
        return rows
    finally:
        subprocess.run([*run[:-1], "--rollback", "--force"], env=env, capture_output=True, timeout=120)


def _openclaw_alone(turns: int) -> list[dict]:
    from ark_trainer.services.openclaw.deploy import provider_patch
    from ark_trainer.services.openclaw.shape import CaptureServer, patch_for

    rows = []
    with tempfile.TemporaryDirectory(prefix="ark-bench-") as tmp, CaptureServer() as server:
        state = Path(tmp) / "state"
        state.mkdir()
        config = patch_for(server.base_url, provider_patch("ark-instant", 1, 8192, 512, None, "k", "bare"))
        (state / "openclaw.json").write_text(json.dumps(config))
        for i, q in enumerate(QUESTIONS[:turns]):
            row = _agent_turn({"OPENCLAW_STATE_DIR": str(state), "HOME": tmp}, q, "bench-alone")
            rows.append({**row, "turn": i + 1})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="/work/models/smollm2-hf")
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--before_turns", type=int, default=1, help="turns of the slow 'before' setup")
    args = parser.parse_args()
    results: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="ark-bench-turn-") as tmp:
        results["after (prompt shape bare, OpenClaw knobs)"] = _deployed(
            args.model, "auto", args.turns, Path(tmp)
        )
        _write(results, args)
        results["OpenClaw alone (an instant model)"] = _openclaw_alone(args.turns)
        _write(results, args)
        try:
            before = _deployed(args.model, "openclaw", args.before_turns, Path(tmp))
        except subprocess.TimeoutExpired:  # deploy's smoke request alone prefills ~7.7k tokens
            before = [{"turn": "-", "wall_s": "> 900 (deploy's smoke request)", "openclaw_cpu_s": "-", "answer": "",
                       "load_before": "-", "load_after": round(_load(), 2)}]  # fmt: skip
        results["before (prompt shape openclaw, no knobs)"] = before
    _write(results, args)


def _write(results: dict, args) -> None:
    """The table of what has been measured so far (rewritten after each setup)."""
    lines = ["# `openclaw agent --local` turn time, SmolLM2-135M-Instruct deployed", ""]
    lines += [
        "| setup | turn | wall s | OpenClaw CPU s | prefill tokens | reply tokens | asked | load (1 min) before → after | answer |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for setup, rows in results.items():
        for r in rows:
            lines.append(
                f"| {setup} | {r['turn']} | {r['wall_s']} | {r['openclaw_cpu_s']} | {r.get('prefill_tokens', '-')} | "
                f"{r.get('reply_tokens', '-')} | {r.get('asked_max_completion_tokens', '-')} | "
                f"{r['load_before']} → {r['load_after']} | {r['answer'][:60]!r} |"
            )
    lines += [
        "",
        f"Model: {args.model}. Command: `python bench/openclaw_turn.py --turns {args.turns} --before_turns "
        f"{args.before_turns}`. OpenClaw CPU s: the agent process's own CPU time (Node), apart from the model "
        "server's; wall s includes both.",
    ]
    write_results("openclaw_turn", lines, {"model": args.model, "results": results}, quick=False)


if __name__ == "__main__":
    main()
