"""The declarative grader spec (``--reward_config rewards.yaml``): parse, validate, build.

A spec is a list of graders under ``graders:``; the composite reward is their weighted mean (see
``rewards/composite.py``). Field names follow OpenAI's RFT graders where there is one::

    graders:
      - name: verdict                 # unique; TRL logs rewards/<name>/mean
        type: rule                    # a built-in (or package.module:function) reward by name
        rule: qc_verdict
        weight: 1.0
      - name: apologises
        type: string_check            # eq | ne | like (contains) | ilike (contains, any case)
        input: "{{sample.output_text}}"
        reference: "抱歉"
        operation: like
      - name: no_phone_number
        type: regex                   # matched with the `regex` engine, at most `timeout` s per sample
        pattern: "1[3-9]\\d{9}"
        expect: no_match
        timeout: 1.0                  # default; a sample that runs out of time is skipped (None), counted
      - name: close_to_reference
        type: text_similarity         # fuzzy_match token_f1 bleu rouge_1..rouge_5 rouge_l
        reference: "{{item.reference}}"
        evaluation_metric: rouge_l
      - name: rm
        type: reward_model
        model_path: runs/rm
      - name: judge
        type: llm_judge               # alias: score_model
        base_url: http://127.0.0.1:8000/v1
        model: qwen2.5-7b-instruct
        rubric: "Rate 1-10 how polite this reply is: {{sample.output_text}}"
        range: [1, 10]
      - name: mine
        type: python
        function: my_pkg.graders:grade   # grade(sample, item) -> float | None
      - name: combined
        type: multi
        graders: {a: {type: string_check, ...}, b: {type: regex, ...}}
        calculate_output: "0.7 * a + 0.3 * b"     # or weights: {a: 0.7, b: 0.3}

An entry without ``type`` is a ``rule`` whose rule is its ``name`` and whose ``params`` go to the rule's
factory (the older ``rewards:`` list of {name, weight, params} is read the same way). Every problem in the
file is reported at once, as ``file:line: field: message``.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import regex
import yaml

from ark_trainer.base.errors import UserError
from ark_trainer.base.ranges import MAX_WEIGHT
from ark_trainer.rewards import graders as g
from ark_trainer.rewards.similarity import METRICS, NEEDS_DOWNLOAD

ALIASES = {"score_model": "llm_judge"}
_META = ("__line__", "__keylines__")
DEFAULT_CODE_TIMEOUT = 60.0  # --reward_timeout's default: a python grader's load and each of its batches


@dataclass(frozen=True)
class GraderKind:
    """A grader ``type:``: the keys its entries may have, and the builder that makes its reward function."""

    name: str
    fields: frozenset[str]
    build: Callable[[_Entry, str], Callable]


KINDS: dict[str, GraderKind] = {}
KIND_MODULES = ("ark_trainer.rewards.episode",)  # more kinds, registered when imported (on first use)
_plugins_loaded = False


def grader_kinds() -> dict[str, GraderKind]:
    """Every grader type by name: this module's, :data:`KIND_MODULES`', then installed plug-ins' (on first use)."""
    global _plugins_loaded
    for module in KIND_MODULES:  # like stages/registry.py's BUILTIN: imported by name, no import cycle
        importlib.import_module(module)
    if not _plugins_loaded:
        _plugins_loaded = True
        from ark_trainer.base.plugins import call_hook

        call_hook("register_grader_kinds", register_grader_kind)
    return KINDS


def register_grader_kind(name: str, fields: set[str] | tuple[str, ...], build: Callable) -> None:
    """:func:`grader_kind` as a call, for plug-ins: ``register(name, keys, build)``; a taken name is refused."""
    grader_kind(name, fields)(build)


def grader_kind(name: str, fields: set[str] | tuple[str, ...]):
    """Decorator: register ``build(entry, name) -> reward function`` as grader type ``name``.

    A kind is one function: its allowed keys sit next to its builder, and a second registration of a name
    (or of an alias) is refused, as :func:`~ark_trainer.rewards.registry.register_reward` refuses one.
    """

    def decorator(build: Callable[[_Entry, str], Callable]) -> Callable[[_Entry, str], Callable]:
        if name in KINDS or name in ALIASES:
            raise ValueError(f"a grader type named {name!r} is already registered; pick another name")
        KINDS[name] = GraderKind(name, frozenset(fields), build)
        return build

    return decorator


class _LineLoader(yaml.SafeLoader):
    """A YAML loader that remembers each mapping's line and each key's line, for file:line errors."""

    def construct_mapping(self, node, deep=False):
        mapping = super().construct_mapping(node, deep=deep)
        mapping["__line__"] = node.start_mark.line + 1
        mapping["__keylines__"] = {
            k.value: k.start_mark.line + 1 for k, _ in node.value if hasattr(k, "value")
        }
        return mapping


def strip_meta(value: Any) -> Any:
    """The YAML value without the loader's line bookkeeping."""
    if isinstance(value, dict):
        return {k: strip_meta(v) for k, v in value.items() if k not in _META}
    if isinstance(value, list):
        return [strip_meta(v) for v in value]
    return value


class _Bad(Exception):
    """This entry cannot be built; its problem is already recorded."""


@dataclass
class GraderSpec:
    name: str
    kind: str
    weight: float
    fn: Callable
    params: dict[str, Any]
    where: str


class _Entry:
    """One grader mapping of the file, with helpers that record file:line problems."""

    def __init__(
        self,
        data: dict,
        path: Path,
        problems: list[str],
        prefix: str = "",
        run_code: bool = True,
        code_timeout: float = DEFAULT_CODE_TIMEOUT,
    ) -> None:
        self.data, self.path, self.problems, self.prefix = data, path, problems, prefix
        self.run_code = run_code  # False: user code is checked for shape, never imported or run
        self.code_timeout = code_timeout  # --reward_timeout: a python grader's load and each batch

    def where(self, key: str | None = None) -> str:
        line = self.data.get("__keylines__", {}).get(key, self.data.get("__line__", 1))
        return f"{self.path}:{line}"

    def fail(self, key: str, message: str) -> _Bad:
        self.problems.append(f"{self.where(key)}: {self.prefix}{key}: {message}")
        return _Bad()

    def has(self, key: str) -> bool:
        return key in self.data and self.data[key] is not None

    def get(self, key: str, types: type | tuple, default: Any = None, *, required: bool = False) -> Any:
        if not self.has(key):
            if required:
                raise self.fail(key, "missing; this grader type needs it")
            return default
        value = self.data[key]
        if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
            raise self.fail(key, f"expected {_type_name(types)}, got {value!r}")
        if not isinstance(value, types):
            raise self.fail(key, f"expected {_type_name(types)}, got {value!r}")
        return strip_meta(value)

    def number(
        self,
        key: str,
        default: float,
        *,
        low: float | None = None,
        high: float | None = None,
        integer: bool = False,
    ) -> float:
        if isinstance(self.data.get(key), str):  # YAML 1.1 reads 1.0e308 (no sign in the exponent) as text
            self.data[key] = number_text(self.data[key], key, self)
        value = self.get(key, int if integer else (int, float), default)
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail(key, f"expected a finite number, got {value!r}")
        if (low is not None and value < low) or (high is not None and value > high):
            if low is not None and high is not None:
                bounds = f"in [{low:g}, {high:g}]"
            else:
                bounds = f"≥ {low:g}" if low is not None else f"≤ {high:g}"
            raise self.fail(key, f"expected a number {bounds}, got {value!r}")
        return value

    def choice(self, key: str, options: tuple[str, ...], default: str | None = None) -> str:
        value = self.get(key, str, default, required=default is None)
        if value not in options:
            raise self.fail(key, f"unknown value {value!r}; use one of {', '.join(options)}")
        return value

    def template(self, key: str, default: str | None = None) -> g.Template:
        text = self.get(key, str, default, required=default is None)
        try:
            return g.Template.parse(text)
        except ValueError as exc:
            raise self.fail(key, str(exc)) from None


NUMBER_TEXT = regex.compile(r"[-+]?(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][-+]?\d+)?")


def number_text(value: str, key: str, entry: _Entry) -> Any:
    """A number YAML left as text (``1.0e308``, ``1e3``: YAML 1.1 wants a dot and a signed exponent), as the
    number it spells; other text is kept, for the type check to refuse."""
    text = value.strip()
    if not NUMBER_TEXT.fullmatch(text):
        return value
    number = float(text.replace("_", ""))
    return int(number) if number.is_integer() and not regex.search(r"[.eE]", text) else number


def _type_name(types) -> str:
    names = {
        str: "text",
        int: "an integer",
        float: "a number",
        dict: "a mapping",
        list: "a list",
        bool: "true/false",
    }
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join(dict.fromkeys(names.get(t, t.__name__) for t in types))


def read_yaml(path: Path) -> Any:
    from ark_trainer.base.yamlsafe import read_yaml_file

    return read_yaml_file(
        path, _LineLoader
    )  # size, depth and alias expansion bounded (an alias bomb in params)


def load_graders(
    path: str | Path, run_code: bool = True, code_timeout: float = DEFAULT_CODE_TIMEOUT
) -> list[GraderSpec]:
    """Parse, validate and build every grader of a spec file; one UserError lists all problems.

    ``run_code=False`` (what ``plan`` uses) checks python graders and ``module:function`` rules for shape
    (and a ``source`` for syntax) without importing or running them: they become :class:`~ark_trainer.
    rewards.graders.UnloadedCode`, which names the grader but cannot score. ``code_timeout``
    (``--reward_timeout``) bounds a python grader's load as it bounds each of its batches.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"--reward_config: no such file {str(path)!r}")
    data = read_yaml(path)
    items = data
    if isinstance(data, dict):
        items = data.get("graders", data.get("rewards"))
        extra = [k for k in data if k not in ("graders", "rewards", *_META)]
        if extra and items is not None:
            line = data["__keylines__"].get(extra[0], 1)
            raise UserError(f"{path}:{line}: {extra[0]}: unknown key; the spec has one list, 'graders'")
    if not isinstance(items, list) or not items:
        raise UserError(
            f"{path}:1: graders: expected a non-empty list of graders ({{name, type, weight, …}})"
        )
    problems: list[str] = []
    specs: list[GraderSpec] = []
    seen: dict[str, str] = {}
    for raw in items:
        if not isinstance(raw, dict):
            problems.append(f"{path}:1: graders: each grader is a mapping with name and type, got {raw!r}")
            continue
        entry = _Entry(raw, path, problems, run_code=run_code, code_timeout=code_timeout)
        name = raw.get("name")
        if isinstance(name, str) and name in seen:
            problems.append(f"{entry.where('name')}: name: {name!r} is already used at {seen[name]}")
            continue
        if isinstance(name, str):
            seen[name] = entry.where("name")
        try:
            specs.append(_top_level(entry))
        except _Bad:
            continue
    if problems:
        raise UserError(*problems)
    return specs


def _top_level(entry: _Entry) -> GraderSpec:
    name = entry.get("name", str, required=True)
    if name == "total":
        raise entry.fail("name", "'total' is the composite's own name; pick another")
    weight = entry.number("weight", 1.0, low=0.0, high=MAX_WEIGHT)
    kind, fn = _build(entry, name, allowed_extra={"name", "weight"})
    params = {k: v for k, v in strip_meta(entry.data).items() if k not in ("name", "type", "weight")}
    return GraderSpec(name, kind, float(weight), fn, params, entry.where())


def _build(entry: _Entry, name: str, allowed_extra: set[str]) -> tuple[str, Callable]:
    kinds = grader_kinds()
    kind = entry.get("type", str, "rule")
    kind = ALIASES.get(kind, kind)
    if kind not in kinds:
        raise entry.fail("type", f"unknown grader type {kind!r}; use one of {', '.join(kinds)}")
    spec = kinds[kind]
    allowed = spec.fields | allowed_extra | {"type", *_META}
    unknown = [k for k in entry.data if k not in allowed]
    for key in unknown:
        entry.fail(
            key, f"unknown key for a {kind} grader; use {', '.join(sorted(spec.fields | allowed_extra))}"
        )
    fn = spec.build(entry, name)
    if unknown:
        raise _Bad()
    if kind == "rule" and getattr(fn, "__name__", None) != name:
        fn = _renamed(fn, name)  # never rename a registered function in place: others share it
    return kind, fn


def _renamed(fn: Callable, name: str) -> Callable:
    def reward(prompts, completions, **columns):
        return fn(prompts=prompts, completions=completions, **columns)

    reward.__name__ = name
    return reward


# --- one builder per kind, registered with its keys (a new kind: one decorated function here) ---


@grader_kind("rule", {"rule", "params"})
def _rule(entry: _Entry, name: str) -> Callable:
    from ark_trainer.rewards.registry import get_reward

    rule = entry.get("rule", str, name)
    params = entry.get("params", dict, {})
    if ":" in rule and not entry.run_code:  # a module:function path: user code, not imported here
        return g.UnloadedCode(name, entry.where("rule" if entry.has("rule") else "name"))
    key = "rule" if entry.has("rule") else "name"
    if ":" in rule:
        _import_in_time(rule.partition(":")[0], entry, key)
    try:
        return get_reward(rule, params, f"{entry.where(key)}: {entry.prefix}{key}")
    except UserError as exc:  # the registry's message already starts with file:line
        entry.problems.extend(exc.messages)
        raise _Bad() from None


def _import_in_time(module: str, entry: _Entry, key: str) -> None:
    """Import a rule's module under ``--reward_timeout``, as a python grader's code is loaded: an import that
    never ends (or ends the process) is refused in one line. Its errors are left to the registry to word;
    a stuck import's thread is left behind (the command ends with the refusal)."""
    import threading

    box: dict[str, BaseException] = {}

    def load() -> None:
        try:
            importlib.import_module(module)
        except BaseException as exc:  # noqa: BLE001 - worded below or by the registry
            box["error"] = exc

    worker = threading.Thread(target=load, daemon=True, name="ark-rule-import")
    worker.start()
    worker.join(entry.code_timeout if entry.code_timeout > 0 else None)
    if worker.is_alive():
        raise entry.fail(
            key, f"importing {module!r} took longer than --reward_timeout {entry.code_timeout:g} s"
        )
    error = box.get("error")
    if isinstance(error, SystemExit | KeyboardInterrupt):
        said = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        raise entry.fail(key, f"importing {module!r} ended the process ({said})")


@grader_kind("string_check", {"input", "reference", "operation"})
def _string_check(entry: _Entry, name: str) -> Callable:
    return g.StringCheck(
        name,
        entry.template("input", "{{sample.output_text}}"),
        entry.template("reference"),
        entry.choice("operation", tuple(g.StringCheck.OPERATIONS)),
    )


@grader_kind("regex", {"input", "pattern", "expect", "ignore_case", "timeout"})
def _regex(entry: _Entry, name: str) -> Callable:
    text = entry.get("pattern", str, required=True)
    flags = regex.V0 | (regex.IGNORECASE if entry.get("ignore_case", bool, False) else 0)  # V0: re's syntax
    try:
        pattern = regex.compile(text, flags)
    except (regex.error, ValueError) as exc:
        raise entry.fail("pattern", f"not a valid regular expression ({exc})") from None
    return g.RegexCheck(
        name,
        entry.template("input", "{{sample.output_text}}"),
        pattern,
        entry.choice("expect", ("match", "no_match"), "match"),
        float(entry.number("timeout", 1.0, low=0.001, high=3600)),  # threading refuses huge timeouts
    )


@grader_kind("text_similarity", {"input", "reference", "evaluation_metric", "pass_threshold"})
def _text_similarity(entry: _Entry, name: str) -> Callable:
    metric = entry.get("evaluation_metric", str, required=True)
    if metric in NEEDS_DOWNLOAD:
        raise entry.fail(
            "evaluation_metric",
            f"{metric!r} needs a downloaded model; use one of {', '.join(METRICS)} (all offline)",
        )
    metric = entry.choice("evaluation_metric", tuple(METRICS))
    threshold = entry.get("pass_threshold", (int, float), None)
    if threshold is not None and not 0 <= threshold <= 1:
        raise entry.fail("pass_threshold", f"expected a number in [0, 1], got {threshold!r}")
    return g.TextSimilarity(
        name,
        entry.template("input", "{{sample.output_text}}"),
        entry.template("reference"),
        metric,
        threshold,
    )


@grader_kind("reward_model", {"model_path", "device", "batch_size", "max_length"})
def _reward_model(entry: _Entry, name: str) -> Callable:
    from ark_trainer.rewards.reward_model import check_reward_model_dir

    model_path = entry.get("model_path", str, required=True)
    try:
        check_reward_model_dir(model_path, f"{entry.where('model_path')}: model_path")
    except UserError as exc:
        entry.problems.extend(exc.messages)
        raise _Bad() from None
    device = entry.get("device", str, "auto")
    if device not in ("auto", "cpu") and not device.startswith("cuda"):
        raise entry.fail("device", f"unknown device {device!r}; use auto, cpu, cuda or cuda:N")
    from ark_trainer.rewards.reward_model import LazyRewardModel

    return LazyRewardModel(
        model_path,
        device,
        name,
        int(entry.number("batch_size", 16, low=1, integer=True)),
        int(entry.number("max_length", 1024, low=8, integer=True)),
    )


@grader_kind(
    "llm_judge",
    {
        *("model", "base_url", "api_key_env", "input", "rubric", "system", "range", "temperature"),
        *("max_tokens", "timeout", "max_retries", "backoff", "concurrency", "cache", "on_failure"),
    },
)
def _llm_judge(entry: _Entry, name: str) -> Callable:
    from ark_trainer.rewards.llm_judge import build_judge

    return build_judge(entry, name)


@grader_kind("python", {"function", "source"})
def _python(entry: _Entry, name: str) -> Callable:
    """The code is loaded (and later run) in a host process of its own (``rewards/codehost.py``), under
    ``--reward_timeout`` at load as at grading."""
    from ark_trainer.rewards.codehost import CodeHost, CodeLoadError

    if entry.has("function") == entry.has("source"):
        raise entry.fail(
            "function", "give exactly one of function (package.module:function) or source (code)"
        )
    if entry.has("function"):
        target = entry.get("function", str)
        module_name, _, attr = target.partition(":")
        if not module_name or not attr:
            raise entry.fail("function", f"expected package.module:function, got {target!r}")
        key, load = "function", {"kind": "function", "target": target}
    else:
        try:  # compiling checks the syntax and runs nothing
            compile(entry.get("source", str), f"<{name} source>", "exec")
        except (SyntaxError, ValueError) as exc:
            raise entry.fail("source", f"the code does not compile: {exc}") from None
        key, load = "source", {"kind": "source", "text": entry.get("source", str), "name": name}
    if not entry.run_code:
        return g.UnloadedCode(name, entry.where(key))
    host = CodeHost(name, load, entry.code_timeout)
    try:
        host.start()
    except CodeLoadError as exc:
        raise entry.fail(exc.key, exc.message) from None
    return g.PythonGrader(name, host, entry.where(key))


@grader_kind("multi", {"graders", "calculate_output", "weights"})
def _multi(entry: _Entry, name: str) -> Callable:
    subs = entry.get("graders", dict, required=True)
    raw = entry.data["graders"]
    if not subs:
        raise entry.fail("graders", "expected a mapping of name: grader")
    built: dict[str, Callable] = {}
    for sub_name, sub in raw.items():
        if sub_name in _META:
            continue
        if not isinstance(sub, dict):
            raise entry.fail("graders", f"{sub_name}: expected a grader mapping, got {strip_meta(sub)!r}")
        if not str(sub_name).isidentifier():
            raise entry.fail(
                "graders", f"{sub_name!r}: sub-grader names must be identifiers (for the formula)"
            )
        sub_entry = _Entry(
            sub,
            entry.path,
            entry.problems,
            prefix=f"graders.{sub_name}.",
            run_code=entry.run_code,
            code_timeout=entry.code_timeout,
        )
        built[sub_name] = _build(sub_entry, f"{name}.{sub_name}", allowed_extra=set())[1]
    formula, weights = None, {n: 1.0 for n in built}
    if entry.has("calculate_output") and entry.has("weights"):
        raise entry.fail("weights", "give calculate_output or weights, not both")
    if entry.has("calculate_output"):
        try:
            formula = g.check_formula(entry.get("calculate_output", str), set(built))
        except ValueError as exc:
            raise entry.fail("calculate_output", str(exc)) from None
    elif entry.has("weights"):
        given = entry.get("weights", dict)
        for key, value in given.items():
            if key not in built:
                raise entry.fail("weights", f"{key!r} is not a sub-grader; use {', '.join(built)}")
            value = number_text(value, key, entry) if isinstance(value, str) else value
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_WEIGHT:
                raise entry.fail("weights", f"{key}: expected a number in [0, {MAX_WEIGHT:g}], got {value!r}")
            given[key] = value
        weights = {n: float(given.get(n, 0.0)) for n in built}
        if sum(weights.values()) <= 0:
            raise entry.fail("weights", "at least one weight must be > 0")
    where = entry.where("calculate_output" if formula is not None else "graders")
    return g.MultiGrader(name, built, formula, weights, where)
