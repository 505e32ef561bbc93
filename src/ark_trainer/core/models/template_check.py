"""A model's chat template rendered once, in a child process, within a time, output and memory bound,
before anything trusts it.

A chat template is code from the model file (GGUF metadata, ``tokenizer_config.json``): nested loops hung
``train`` and ``deploy``, a template that builds a 20 GB string ran out of memory, one that raises or reads
what the sandbox forbids gave a traceback. :func:`check_chat_template` renders a one-message conversation
with jinja2's ``ImmutableSandboxedEnvironment`` (what transformers renders with: loop controls,
``raise_exception``, ``strftime_now``, its ``{% generation %}`` tag) in a child process that is killed after
:data:`RENDER_SECONDS`, may grow by :data:`MEMORY_BYTES` and stops reading at :data:`MAX_OUTPUT_CHARS`.
Every way it fails is one line naming where the template is and what it did. A template that passes is
remembered for the process (by its hash).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

from ark_trainer.base.errors import UserError

RENDER_SECONDS = 10.0  # a real template renders one message in milliseconds; this is for a loaded machine
MAX_OUTPUT_CHARS = 1_000_000  # one short message rendered: a few hundred characters
MEMORY_BYTES = 1 << 30  # the child's address space may grow by this much while it renders
MAX_TEMPLATE_CHARS = 1_000_000  # the real ones are a few kB
_PASSED: set[str] = set()

_CHILD = r"""
import json, resource, sys
from datetime import datetime

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

args = json.loads(sys.stdin.read())
with open("/proc/self/status") as fh:  # from here on (jinja2 folds constants while it compiles) memory is bounded
    size = next((int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize:")), 0)
if size:
    resource.setrlimit(resource.RLIMIT_AS, (size + args["memory"], size + args["memory"]))


class Generation(Extension):  # transformers' {% generation %}...{% endgeneration %}: renders its body
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def answer(**kw):
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()
    sys.exit(0)


try:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols])
    env.filters["tojson"] = lambda x, indent=None, separators=None, sort_keys=False: json.dumps(
        x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys
    )
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    template = env.from_string(args["template"])
except jinja2.TemplateSyntaxError as exc:
    answer(problem=f"is not valid Jinja (line {exc.lineno}: {exc.message})")
except MemoryError:
    answer(problem=f"needs more than {args['memory'] >> 20} MB to compile")
except Exception as exc:
    answer(problem=f"does not compile ({type(exc).__name__}: {str(exc)[:200]})")
total = 0
try:
    for chunk in template.generate(
        messages=[{"role": "user", "content": "Hello"}], add_generation_prompt=True, tools=None, documents=None,
        bos_token=args["bos"], eos_token=args["eos"],
    ):
        total += len(chunk)
        if total > args["cap"]:
            answer(problem=f"renders one short message as over {args['cap']} characters")
except MemoryError:
    answer(problem=f"needs more than {args['memory'] >> 20} MB to render one short message")
except jinja2.exceptions.SecurityError as exc:
    answer(problem=f"does what the sandbox forbids ({str(exc)[:200]})")
except RecursionError:
    answer(problem="recurses without end")
except Exception as exc:
    answer(problem=f"raises on one short message ({type(exc).__name__}: {str(exc)[:200]})")
answer(chars=total)
"""


def check_chat_template(template: str, where: str, bos: str = "", eos: str = "") -> None:
    """Refuse ``template`` (from ``where``: a file, or a GGUF's ``tokenizer.chat_template``) in one line when
    it does not render a one-message conversation within the bounds."""
    fix = "fix the template, or use a model whose chat template is sound"
    if len(template) > MAX_TEMPLATE_CHARS:
        raise UserError(
            f"{where}: the chat template is {len(template)} characters (at most {MAX_TEMPLATE_CHARS}); {fix}"
        )
    key = hashlib.sha256(f"{template}\0{bos}\0{eos}".encode("utf-8", "surrogatepass")).hexdigest()
    if key in _PASSED:
        return
    request = json.dumps(
        {"template": template, "bos": bos, "eos": eos, "cap": MAX_OUTPUT_CHARS, "memory": MEMORY_BYTES},
        ensure_ascii=True,
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD],
            input=request,
            capture_output=True,
            text=True,
            timeout=RENDER_SECONDS,
        )
    except subprocess.TimeoutExpired:  # subprocess.run kills the child
        raise UserError(
            f"{where}: the chat template did not render one short message within {RENDER_SECONDS:g} s "
            f"(loops without end?); {fix}"
        ) from None
    lines = done.stdout.strip().splitlines()
    try:
        result = json.loads(lines[-1]) if lines else {}
    except ValueError:
        result = {}
    if "chars" in result:
        _PASSED.add(key)
        return
    problem = result.get("problem") or f"could not be rendered (the renderer exited with {done.returncode})"
    raise UserError(f"{where}: the chat template {problem}; {fix}")
