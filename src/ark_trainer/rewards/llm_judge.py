"""The ``llm_judge`` grader: an LLM with a rubric scores each completion (OpenAI's ``score_model``).

It posts the templated messages to an OpenAI-compatible ``/v1/chat/completions`` endpoint (vLLM,
``transformers serve``, llama.cpp, OpenAI itself) with the standard library only, reads a number from the
reply and maps the spec's ``range`` [lo, hi] onto [0, 1]. The reply may be ``{"score": 7}``, ``Score: 7``
or a bare ``7``.

Robustness, because a judge is a network service that a multi-hour run depends on:

- every request has a ``timeout``: a total deadline from connecting to the reply's last byte (a server that
  trickles its answer a byte at a time is cut off too, ``base/httpclient.py``); timeouts, connection errors, HTTP 429 and 5xx are retried
  ``max_retries`` times with exponential ``backoff`` (1×, 2×, 4× … seconds);
- a reply without a number in range, or a request that still fails, is a *failed sample*: scored
  ``None`` (not applicable, left out of the composite) or ``0`` (``on_failure: zero``), counted in
  :attr:`LLMJudge.stats` and reported by ``ark-trainer score``; the run goes on;
- HTTP 400/401/403/404 mean the spec is wrong (model name, key, URL): a :class:`UserError` at once;
  401, 403 and 404 are :class:`RewardUnavailable`, which stops ``train`` too (a wrong key would fail every
  sample), where a 400 (e.g. one answer too long for the judge) skips only that sample in ``train``;
- redirects are never followed: the API key would go along to wherever the 3xx points. A redirect is
  :class:`RewardUnavailable` naming the target; put the final URL in ``base_url``;
- a judge that cannot be reached before it ever answered (connection refused, unknown host) is
  :class:`RewardUnavailable` at the first request, not minutes of retries per answer; once it has
  answered, the same errors are retried like any other (a judge restarting mid-run);
- answers are cached by request (model, messages, sampling settings) in memory, or in a JSONL file
  (``cache: judge_cache.jsonl``) that survives restarts, so a re-run or a repeated sample costs nothing.

The API key is read from the environment variable named by ``api_key_env``, never from the spec file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import json_line, jsonl_file_lines
from ark_trainer.base.httpclient import AnswerTooLarge, post_json
from ark_trainer.base.ranges import MAX_NEW_TOKENS
from ark_trainer.rewards.contract import RewardUnavailable
from ark_trainer.rewards.graders import Template, contexts

log = logging.getLogger("ark_trainer")

_SCORE_RE = re.compile(r"score\W{0,3}\s*(-?\d+(?:\.\d+)?)", re.IGNORECASE)
_NUMBER_RE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(?:/\s*\d+(?:\.\d+)?)?\s*\.?\s*$")
_JSON_RE = re.compile(r"\{[^{}]*\}")
_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
_FATAL_STATUS = {401, 403, 404}  # the key or the URL is wrong: every sample would fail alike
# bounds of a judge's settings: one call (all its tries) must end in a time a run can wait for
MAX_TIMEOUT, MAX_RETRIES, MAX_BACKOFF, MAX_CONCURRENCY = 3600, 10, 600, 256


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Turns every 3xx into an HTTPError: following it would send the API key to another server."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


MAX_REPLY_BYTES = 4_000_000  # a judge's answer is a score and a sentence; more is a broken or hostile server


def default_system(lo: float, hi: float) -> str:
    return (
        "You are a strict grader. Grade the answer with the rubric. "
        f'Reply with JSON only: {{"score": <a number from {lo:g} to {hi:g}>}}'
    )


def parse_score(text: str) -> float | None:
    """The score in a judge's reply, or ``None`` when there is none."""
    for blob in _JSON_RE.findall(text):
        try:
            value = json.loads(blob).get("score")
        except (ValueError, AttributeError):
            continue
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
    match = _SCORE_RE.search(text) or _NUMBER_RE.match(text)
    return float(match.group(1)) if match else None


class _Cache:
    """Request hash → reply text, in memory and optionally appended to a JSONL file."""

    def __init__(self, path: Path | None) -> None:
        self.path, self.data, self.lock = path, {}, threading.Lock()
        if path is not None and path.is_file():
            for line in jsonl_file_lines(path):
                try:
                    entry = json.loads(line)
                    self.data[entry["key"]] = entry["reply"]
                except (ValueError, KeyError, TypeError):
                    continue  # a torn last line after a crash: that answer is simply asked again

    def get(self, key: str) -> str | None:
        return self.data.get(key)

    def put(self, key: str, reply: str) -> None:
        with self.lock:
            self.data[key] = reply
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.write(json_line({"key": key, "reply": reply}))


class LLMJudge:
    """TRL-contract reward function that asks an OpenAI-compatible chat endpoint for a score."""

    def __init__(
        self,
        name: str,
        *,
        model: str,
        base_url: str,
        messages: list[tuple[str, Template]],
        score_range: tuple[float, float] = (0.0, 1.0),
        api_key_env: str | None = None,
        temperature: float = 0.0,
        max_tokens: int = 64,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff: float = 1.0,
        concurrency: int = 4,
        cache: str | None = "memory",
        on_failure: str = "skip",
        where: str = "llm_judge",
    ) -> None:
        self.__name__ = name
        self.model, self.messages = model, messages
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.lo, self.hi = score_range
        self.api_key_env = api_key_env
        self.temperature, self.max_tokens = temperature, max_tokens
        self.timeout, self.max_retries, self.backoff = timeout, max_retries, backoff
        self.concurrency, self.on_failure, self.where = max(1, concurrency), on_failure, where
        self.cache = (
            None
            if cache is None or cache in ("none", "off")
            else _Cache(None if cache == "memory" else Path(cache))
        )
        self.stats = {"requests": 0, "cache_hits": 0, "scored": 0, "request_failures": 0, "parse_failures": 0}
        self._lock = threading.Lock()
        self.answered = False  # set by the first good reply: after it, a refused connection is retried
        self.unavailable: RewardUnavailable | None = None  # once set, every later request raises it

    # --- one sample ---

    def _body(self, sample: dict, item: dict) -> dict | None:
        messages = []
        for role, template in self.messages:
            text = template.render(sample, item)
            if text is None:
                return None
            messages.append({"role": role, "content": text})
        return {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "stream": False,
        }

    def _count(self, key: str) -> None:
        with self._lock:
            self.stats[key] += 1

    def _post(self, body: dict) -> str | None:
        """The reply text, or ``None`` after the retries are spent."""
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        last = ""
        for attempt in range(self.max_retries + 1):
            if self.unavailable is not None:  # another thread found the judge unusable: ask no more
                raise self.unavailable
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            self._count("requests")
            try:
                payload = post_json(self.url, body, headers, self.timeout, MAX_REPLY_BYTES, (_NoRedirect(),))
                reply = str(payload["choices"][0]["message"]["content"] or "")
                self.answered = True
                return reply
            except urllib.error.HTTPError as exc:
                if exc.code not in _RETRY_STATUS:
                    raise self._unusable(self._http_error(exc)) from None
                last = f"HTTP {exc.code}"
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                reason = getattr(exc, "reason", exc)
                if not self.answered and isinstance(reason, ConnectionRefusedError | socket.gaierror):
                    raise self._unusable(
                        RewardUnavailable(
                            f"{self.where}: llm_judge {self.__name__!r}: cannot reach {self.url} ({reason}); "
                            "start the judge server or fix base_url"
                        )
                    ) from None
                last = f"{type(exc).__name__}: {reason}"
            except AnswerTooLarge:
                last = f"reply longer than {MAX_REPLY_BYTES} bytes"
            except (ValueError, KeyError, IndexError, TypeError):
                last = "reply is not an OpenAI chat completion"
        log.warning(
            "llm_judge %s: request failed after %d tries (%s)", self.__name__, self.max_retries + 1, last
        )
        return None

    def _unusable(self, error: UserError) -> UserError:
        if isinstance(error, RewardUnavailable):
            self.unavailable = error
        return error

    def _http_error(self, exc: urllib.error.HTTPError) -> UserError:
        """The one-line error for an HTTP status that retrying cannot fix."""
        head = f"{self.where}: llm_judge {self.__name__!r}: {self.url} answered HTTP {exc.code}"
        if 300 <= exc.code < 400:
            target = exc.headers.get("Location", "elsewhere") if exc.headers else "elsewhere"
            return RewardUnavailable(
                f"{head} (a redirect to {target}); redirects are not followed, so the API key goes to no "
                "other server: put the final URL in base_url"
            )
        kind = RewardUnavailable if exc.code in _FATAL_STATUS else UserError
        return kind(f"{head} ({exc.reason}); check base_url, model and api_key_env")

    def _request_key(self, body: dict) -> str:
        blob = json.dumps([self.url, body], ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def grade(self, sample: dict, item: dict) -> float | None:
        body = self._body(sample, item)
        if body is None:
            return None  # a templated field is missing: not applicable, not a failure
        key = self._request_key(body)
        reply = self.cache.get(key) if self.cache else None
        if reply is not None:
            self._count("cache_hits")
        else:
            reply = self._post(body)
            if reply is None:
                self._count("request_failures")
                return self._failed()
        score = parse_score(reply)
        if score is None or not self.lo <= score <= self.hi:
            self._count("parse_failures")
            log.warning("llm_judge %s: no score in range in reply %r", self.__name__, reply[:80])
            return self._failed()
        if self.cache is not None:
            self.cache.put(key, reply)  # only good replies are cached, so a failure is asked again
        self._count("scored")
        return (score - self.lo) / (self.hi - self.lo)

    def _failed(self) -> float | None:
        return 0.0 if self.on_failure == "zero" else None

    def applies(self, prompts: list, completions: list, **columns: Any) -> list[bool]:
        """Whether each sample would be judged (its templates fill in), without asking the judge."""
        return [self._body(s, i) is not None for s, i in contexts(prompts, completions, columns)]

    def __call__(self, prompts: list, completions: list, **columns: Any) -> list[float | None]:
        ctx = contexts(prompts, completions, columns)
        if self.concurrency == 1 or len(ctx) == 1:
            return [self.grade(s, i) for s, i in ctx]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(ctx))) as pool:
            futures = [pool.submit(self.grade, s, i) for s, i in ctx]
            try:
                return [f.result() for f in futures]
            finally:  # after a RewardUnavailable, the answers not yet asked are not asked
                pool.shutdown(cancel_futures=True)


# --- built from a spec entry ---


def build_judge(entry, name: str) -> LLMJudge:
    """An LLMJudge from a spec entry (``rewards/spec.py``'s ``_Entry``, which records file:line problems)."""
    model = entry.get("model", str, required=True)
    base_url = entry.get("base_url", str, required=True)
    if not base_url.startswith(("http://", "https://")):
        raise entry.fail(
            "base_url", f"expected an http(s) URL such as http://127.0.0.1:8000/v1, got {base_url!r}"
        )
    lo, hi = _range(entry)
    messages = _judge_messages(entry, default_system(lo, hi))
    cache = entry.get("cache", (str, bool), "memory")
    cache = "memory" if cache is True else None if cache is False else cache
    return LLMJudge(
        name,
        model=model,
        base_url=base_url,
        messages=messages,
        score_range=(lo, hi),
        api_key_env=entry.get("api_key_env", str, None),
        temperature=float(entry.number("temperature", 0.0, low=0.0)),
        max_tokens=int(entry.number("max_tokens", 64, low=1, high=MAX_NEW_TOKENS, integer=True)),
        timeout=float(entry.number("timeout", 30.0, low=0.001, high=MAX_TIMEOUT)),
        max_retries=int(entry.number("max_retries", 3, low=0, high=MAX_RETRIES, integer=True)),
        backoff=float(entry.number("backoff", 1.0, low=0.0, high=MAX_BACKOFF)),
        concurrency=int(entry.number("concurrency", 4, low=1, high=MAX_CONCURRENCY, integer=True)),
        cache=cache,
        on_failure=entry.choice("on_failure", ("skip", "zero"), "skip"),
        where=entry.where(),
    )


def _range(entry) -> tuple[float, float]:
    value = entry.get("range", list, [0, 1])
    if len(value) != 2 or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value):
        raise entry.fail("range", f"expected [low, high], got {value!r}")
    if value[0] >= value[1]:
        raise entry.fail("range", f"low must be below high, got {value!r}")
    return float(value[0]), float(value[1])


def _judge_messages(entry, system: str) -> list[tuple[str, Template]]:
    if entry.has("input") == entry.has("rubric"):
        raise entry.fail("rubric", "give exactly one of rubric (text) or input (a list of {role, content})")
    if entry.has("rubric"):
        system = entry.get("system", str, system)
        return [("system", Template.parse(system)), ("user", entry.template("rubric"))]
    messages = []
    for msg in entry.get("input", list):
        if not isinstance(msg, dict) or not isinstance(msg.get("content"), str):
            raise entry.fail("input", "each message needs role and content (text)")
        if msg.get("role") not in ("system", "developer", "user", "assistant"):
            raise entry.fail(
                "input", f"unknown role {msg.get('role')!r}; use system, developer, user, assistant"
            )
        try:
            messages.append((msg["role"], Template.parse(msg["content"])))
        except ValueError as exc:
            raise entry.fail("input", str(exc)) from None
    if not messages:
        raise entry.fail("input", "expected at least one message")
    return messages
