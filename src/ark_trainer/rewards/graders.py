"""The grader kinds of a reward spec (``rewards/spec.py`` builds them from YAML and validates them).

Every grader is a callable with TRL's reward contract ``fn(prompts, completions, **columns)`` and a
``__name__`` (TRL logs rewards by it). Per-sample graders see two dicts, as OpenAI's graders do:

- ``sample``: ``{"output_text": <the completion's text>}``;
- ``item``: the data row's columns (``label``, ``reference``, ``id``, …) plus ``prompt`` (the last user
  turn's text).

Text fields are templates: ``{{sample.output_text}}``, ``{{item.label}}``, ``{{item.meta.lang}}``. A
template that names a field the row does not have (or that is null) makes the grader return ``None``
(not applicable) for that sample rather than grade an empty string.

A grader that fails on one sample by itself (a regex that runs out of time, a sub-grader's score that is
not a finite number) scores it ``None`` and counts it in ``failed``/``failure``; :func:`failures` sums
them over nested graders, for ``score``'s summary and ``train``'s ``reward_skipped`` events.
"""

from __future__ import annotations

import ast
import json
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import regex

from ark_trainer.base.errors import UserError
from ark_trainer.rewards.codehost import CodeHost
from ark_trainer.rewards.contract import (
    SCORE_LIMIT,
    RewardUnavailable,
    as_score,
    completion_text,
    prompt_text,
)
from ark_trainer.rewards.similarity import METRICS

# Keyword arguments TRL adds to a reward call that are not data columns.
TRL_KWARGS = {"completion_ids", "trainer_state", "log_extra", "log_metric", "environments"}
_PLACEHOLDER = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_MISSING = object()


@dataclass(frozen=True)
class Template:
    """A text with ``{{item.x}}`` / ``{{sample.output_text}}`` placeholders."""

    text: str
    fields: tuple[tuple[str, ...], ...]

    @classmethod
    def parse(cls, text: str) -> Template:
        """Parse and check the placeholders; ValueError says what is wrong."""
        fields = []
        for match in _PLACEHOLDER.finditer(text):
            path = tuple(match.group(1).split("."))
            if path[0] not in ("item", "sample") or len(path) < 2 or not all(path):
                raise ValueError(
                    f"placeholder {match.group(0)!r}: use {{{{item.<column>}}}} or {{{{sample.output_text}}}}"
                )
            if path[0] == "sample" and path[1] != "output_text":
                raise ValueError(f"placeholder {match.group(0)!r}: sample has only output_text")
            fields.append(path)
        if "{{" in _PLACEHOLDER.sub("", text):
            raise ValueError("unbalanced '{{'; placeholders are {{item.<column>}} or {{sample.output_text}}")
        return cls(text, tuple(fields))

    def render(self, sample: dict, item: dict) -> str | None:
        """The filled-in text, or ``None`` when a field is missing or null."""
        roots = {"sample": sample, "item": item}
        values = []
        for path in self.fields:
            value: Any = roots[path[0]]
            for key in path[1:]:
                value = value.get(key, _MISSING) if isinstance(value, dict) else _MISSING
            if value is _MISSING or value is None:
                return None
            values.append(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
        it = iter(values)
        return _PLACEHOLDER.sub(lambda _m: next(it), self.text)


OUTPUT_TEXT = Template.parse("{{sample.output_text}}")


def contexts(prompts: list, completions: list, columns: dict[str, Any]) -> list[tuple[dict, dict]]:
    """(sample, item) per completion, from TRL's batch arguments."""
    names = [k for k, v in columns.items() if k not in TRL_KWARGS and isinstance(v, list | tuple)]
    out = []
    for i, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
        item = {k: columns[k][i] for k in names if i < len(columns[k])}
        item.setdefault("prompt", prompt_text(prompt))
        out.append(({"output_text": completion_text(completion)}, item))
    return out


def failures(fn: Any) -> tuple[int, str]:
    """Samples that ``fn`` (and the graders nested in it) failed on so far, and the latest reason."""
    count, reason = getattr(fn, "failed", 0), getattr(fn, "failure", "")
    for sub in getattr(fn, "graders", {}).values():
        n, why = failures(sub)
        count, reason = count + n, why or reason
    return count, reason


def applies(fn: Callable, prompts: list, completions: list, columns: dict[str, Any]) -> list[bool]:
    """Whether ``fn`` grades each completion; judges and reward models answer without being asked.

    A grader with an ``applies`` method answers cheaply (no request, no model load); any other is called.
    One that raises is taken to apply: doubt never refuses a run.
    """
    cheap = getattr(fn, "applies", None)
    try:
        if callable(cheap):
            return [bool(a) for a in cheap(prompts, completions, **columns)]
        return [s is not None for s in fn(prompts=prompts, completions=completions, **columns)]
    except Exception:  # noqa: BLE001 - user code: it may need what a real answer has
        return [True] * len(completions)


class PerSampleGrader:
    """Base class: grades one (sample, item) at a time with :meth:`grade`."""

    failed, failure = 0, ""

    def __init__(self, name: str) -> None:
        self.__name__ = name

    def grade(self, sample: dict, item: dict) -> float | None:
        raise NotImplementedError

    def __call__(self, prompts: list, completions: list, **columns: Any) -> list[float | None]:
        return [self.grade(s, i) for s, i in contexts(prompts, completions, columns)]


class StringCheck(PerSampleGrader):
    """1 or 0: ``eq`` equal, ``ne`` not equal, ``like`` contains, ``ilike`` contains ignoring case."""

    OPERATIONS: dict[str, Callable[[str, str], bool]] = {
        "eq": operator.eq,
        "ne": operator.ne,
        "like": lambda text, ref: ref in text,
        "ilike": lambda text, ref: ref.lower() in text.lower(),
    }

    def __init__(self, name: str, input: Template, reference: Template, operation: str) -> None:
        super().__init__(name)
        self.input, self.reference, self.op = input, reference, self.OPERATIONS[operation]

    def grade(self, sample, item):
        text, ref = self.input.render(sample, item), self.reference.render(sample, item)
        if text is None or ref is None:
            return None
        return float(self.op(text.strip(), ref.strip()))


class RegexCheck(PerSampleGrader):
    """1 when the pattern is found in the input (``expect: match``) or not found (``expect: no_match``).

    Matched with the ``regex`` engine and a ``timeout`` per sample: a pattern with catastrophic
    backtracking (``(a+)+$`` on a long run of ``a``) would hold the interpreter for hours under ``re``,
    past every watchdog. A sample that runs out of time is not applicable (``None``) and counted.
    """

    def __init__(
        self, name: str, input: Template, pattern: regex.Pattern, expect: str, timeout: float = 1.0
    ) -> None:
        super().__init__(name)
        self.input, self.pattern, self.want, self.timeout = input, pattern, expect == "match", timeout

    def grade(self, sample, item):
        text = self.input.render(sample, item)
        if text is None:
            return None
        try:  # concurrent: the GIL is released, so the heartbeat and the reward guard keep running
            found = self.pattern.search(text, timeout=self.timeout, concurrent=True) is not None
        except TimeoutError:
            self.failed += 1
            self.failure = (
                f"regex {self.pattern.pattern[:40]!r} took over {self.timeout:g}s on a {len(text)}-character "
                "input (catastrophic backtracking?); simplify the pattern or raise its timeout"
            )
            return None
        return float(found == self.want)


class TextSimilarity(PerSampleGrader):
    """A similarity metric in [0, 1]; with ``pass_threshold``, 1 at or above it and 0 below."""

    def __init__(
        self, name: str, input: Template, reference: Template, metric: str, pass_threshold: float | None
    ) -> None:
        super().__init__(name)
        self.input, self.reference, self.metric = input, reference, METRICS[metric]
        self.pass_threshold = pass_threshold

    def grade(self, sample, item):
        text, ref = self.input.render(sample, item), self.reference.render(sample, item)
        if text is None or ref is None:
            return None
        score = self.metric(text, ref)
        if self.pass_threshold is not None:
            return float(score >= self.pass_threshold)
        return round(score, 6)


class GraderEnded(RewardUnavailable):
    """Grader code that tried to end the process (``sys.exit``, ``KeyboardInterrupt``) or whose process died:
    a grader error that stops ``score`` and ``train`` in one line (exit 2), never the end of the command."""


class PythonGrader(PerSampleGrader):
    """User code ``grade(sample, item) -> float | None`` (OpenAI's python grader contract), run in a host
    process of its own (:mod:`ark_trainer.rewards.codehost`): a batch is one round trip."""

    def __init__(self, name: str, host: CodeHost, where: str) -> None:
        super().__init__(name)
        self.host, self.where = host, where

    def __call__(self, prompts: list, completions: list, **columns: Any) -> list[float | None]:
        pairs = contexts(prompts, completions, columns)
        outcomes = self._outcomes(pairs)
        return [self._checked(o, s) for o, (s, _) in zip(outcomes, pairs, strict=True)]

    def grade(self, sample, item):
        return self._checked(self._outcomes([(sample, item)])[0], sample)

    def _outcomes(self, pairs: list[tuple[dict, dict]]) -> list[list]:
        from ark_trainer.rewards.codehost import HostEnded

        try:
            return self.host.grade_many(pairs)
        except HostEnded as exc:
            raise GraderEnded(
                f"{self.where}: python grader {self.__name__!r} ended its process ({exc}); a grader returns "
                "a score or None and never exits: fix the code"
            ) from None

    def _checked(self, outcome: list, sample: dict) -> float | None:
        if outcome[0] == "raised":
            raise UserError(
                f"{self.where}: python grader {self.__name__!r} raised {outcome[1]}: {outcome[2]} "
                f"(on a sample with output_text {sample['output_text'][:60]!r})"
            )
        value = outcome[1]
        if outcome[0] == "ok" and value is None:
            return None
        if outcome[0] != "ok" or as_score(value) is None:
            shown = value if outcome[0] == "junk" else _short(value)
            raise UserError(
                f"{self.where}: python grader {self.__name__!r} returned {shown}; return None or a "
                f"finite number within ±{SCORE_LIMIT:g}"
            )
        return float(value)


class UnloadedCode:
    """A code grader checked but not loaded (``plan`` runs no user code): it has a name, no scores."""

    def __init__(self, name: str, where: str) -> None:
        self.__name__, self.where = name, where

    def applies(self, prompts: list, completions: list, **columns: Any) -> list[bool]:
        return [True] * len(completions)  # unknown until it runs; doubt never refuses a plan

    def __call__(self, prompts: list, completions: list, **columns: Any) -> list[float | None]:
        raise RuntimeError(
            f"{self.where}: grader {self.__name__!r} was not loaded (a plan runs no user code)"
        )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}…({len(text)} characters)"


# --- multi: weighted mean or a formula over named sub-graders ---

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_BINOPS[ast.Pow] = operator.pow
_FUNCS: dict[str, Callable[..., float]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "clip": lambda x, lo=0.0, hi=1.0: min(max(x, lo), hi),
}
_ARITY = {"min": (2, 32), "max": (2, 32), "abs": (1, 1), "clip": (1, 3)}  # clip(x, lo=0, hi=1)


MAX_FORMULA_CHARS = 1000
MAX_FORMULA_DEPTH = 100  # operators and calls nested in one another (the evaluation recurses this deep)


def check_formula(text: str, names: set[str]) -> ast.Expression:
    """Parse a ``calculate_output`` formula: numbers, grader names, + - * / **, min/max/abs/clip; at most
    :data:`MAX_FORMULA_CHARS` characters nested at most :data:`MAX_FORMULA_DEPTH` deep (Python's parser
    fails on a formula nested thousands deep with a MemoryError or RecursionError)."""
    if len(text) > MAX_FORMULA_CHARS:
        raise ValueError(f"too long ({len(text)} characters; at most {MAX_FORMULA_CHARS}); write it shorter")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not a valid formula ({exc.msg})") from None
    except (RecursionError, MemoryError):
        raise ValueError(f"nests too deeply (at most {MAX_FORMULA_DEPTH} levels); write it flatter") from None
    if _depth(tree) > MAX_FORMULA_DEPTH:
        raise ValueError(f"nests too deeply (at most {MAX_FORMULA_DEPTH} levels); write it flatter")
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if node.id not in names and node.id not in _FUNCS:
                raise ValueError(f"unknown name {node.id!r}; use the sub-graders {sorted(names)}")
        elif isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCS or node.keywords:
                raise ValueError(f"only {', '.join(_FUNCS)} may be called")
            low, high = _ARITY[node.func.id]
            if not low <= len(node.args) <= high or any(isinstance(a, ast.Starred) for a in node.args):
                raise ValueError(f"{node.func.id}() takes {low} to {high} arguments, got {len(node.args)}")
        elif (
            not isinstance(
                node,
                ast.Expression | ast.Constant | ast.BinOp | ast.UnaryOp | ast.USub | ast.UAdd | ast.Load,
            )
            and type(node) not in _BINOPS
        ):
            raise ValueError(f"{type(node).__name__} is not allowed; use numbers, names and + - * / **")
        if isinstance(node, ast.Constant) and not isinstance(node.value, int | float):
            raise ValueError(f"constant {node.value!r} is not a number")
    return tree


def _depth(tree: ast.AST) -> int:
    """How deep the formula's operators and calls nest (iterative: the tree may be deep)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack += [(child, depth + 1) for child in ast.iter_child_nodes(node)]
    return deepest


def _evaluate(node: ast.AST, env: dict[str, float]) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, env)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):  # check_formula: numbers only
        return float(node.value)
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.UnaryOp):
        value = _evaluate(node.operand, env)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        return _BINOPS[type(node.op)](_evaluate(node.left, env), _evaluate(node.right, env))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):  # check_formula: only _FUNCS calls
        return float(_FUNCS[node.func.id](*(_evaluate(a, env) for a in node.args)))
    raise TypeError(type(node).__name__)


class MultiGrader:
    """Combines named sub-graders: a formula (``calculate_output``) or a weighted mean (``weights``).

    With a formula, a sample where a sub-grader it uses is not applicable (``None``) is not applicable
    either, and a division by zero gives ``None``. The weighted mean leaves ``None`` scores out.
    """

    def __init__(
        self,
        name: str,
        graders: dict[str, Callable],
        formula: ast.Expression | None,
        weights: dict[str, float],
        where: str = "",
    ) -> None:
        self.__name__ = name
        self.graders, self.formula, self.weights, self.where = graders, formula, weights, where

    failed, failure = 0, ""

    def __call__(self, prompts, completions, **columns):
        table = {
            n: [self._checked(n, s) for s in g(prompts=prompts, completions=completions, **columns)]
            for n, g in self.graders.items()
        }
        out: list[float | None] = []
        for i in range(len(completions)):
            row = {n: table[n][i] for n in table}
            out.append(self._combine(row))
        return out

    def _checked(self, name: str, score: Any) -> float | None:
        """A sub-grader's score, or None (counted) when it is not a finite number within bounds."""
        if score is None:
            return None
        value = as_score(score)
        if value is None:
            self.failed += 1
            self.failure = f"sub-grader {name!r} returned {_short(score)}, not a finite number within bounds"
        return value

    def applies(self, prompts, completions, **columns) -> list[bool]:
        subs = {n: applies(g, prompts, completions, columns) for n, g in self.graders.items()}
        if self.formula is not None:
            used = [n.id for n in ast.walk(self.formula) if isinstance(n, ast.Name) and n.id in subs]
            return [all(subs[n][i] for n in used) for i in range(len(completions))]
        return [any(subs[n][i] for n in subs if self.weights[n] > 0) for i in range(len(completions))]

    def _formula_failed(self, why: str, values: dict[str, float]) -> None:
        """Count a sample the formula cannot score ((-1) ** 0.5 is complex; the caller skips it), naming the
        grader and the formula's line, as ``score`` and the reward guards report."""
        self.failed += 1
        shown = ", ".join(f"{k}={v:g}" for k, v in sorted(values.items()))
        self.failure = f"{self.where}: multi grader {self.__name__!r}: calculate_output {why} (with {shown})"

    def _combine(self, row: dict[str, float | None]) -> float | None:
        if self.formula is not None:
            used = {n.id for n in ast.walk(self.formula) if isinstance(n, ast.Name) and n.id in row}
            values = {n: float(v) for n in used if (v := row[n]) is not None}
            if len(values) < len(used):
                return None
            try:
                value: Any = _evaluate(self.formula, values)
            except ZeroDivisionError:
                return None
            except (OverflowError, ValueError, TypeError) as exc:  # TypeError: min/max/float of a complex
                self._formula_failed(f"{type(exc).__name__}: {exc}", values)
                return None
            if isinstance(value, complex) or as_score(value) is None:
                self._formula_failed(
                    f"gave {_short(value)}, not a real number within ±{SCORE_LIMIT:g}", values
                )
                return None
            return value
        pairs = [(self.weights[n], s) for n, s in row.items() if s is not None]
        total = sum(w for w, _ in pairs)
        return sum(w * s for w, s in pairs) / total if total > 0 else None
