"""Render a report, given as a list of blocks, to Markdown and to self-contained HTML.

Both renderers take the same blocks, so report.md and report.html cannot disagree.
"""

from __future__ import annotations

import html
from dataclasses import dataclass


# The intermediate structure both renderers share, so report.md and report.html can't disagree.
@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Para:
    text: str
    alert: bool = False  # a warning the reader must not miss


@dataclass(frozen=True)
class Bullets:
    items: list[str]


@dataclass(frozen=True)
class Table:
    header: list[str]
    rows: list[list[str]]


@dataclass(frozen=True)
class Image:
    src: str
    alt: str


@dataclass(frozen=True)
class Code:
    text: str
    summary: str = ""  # non-empty: collapsible (<details>) with this summary


Block = Heading | Para | Bullets | Table | Image | Code


def _md_cell(text: str) -> str:
    """A table cell: its line breaks as ``<br>`` (a Markdown table row is one line)."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", "<br>")


def _fence(text: str) -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}\n{text}\n{ticks}"


def to_markdown(blocks: list[Block]) -> str:
    """Render blocks as GitHub-flavoured Markdown."""
    out = []
    for block in blocks:
        match block:
            case Heading(text, level):
                out.append(f"{'#' * level} {text}")
            case Para(text, alert):
                out.append(f"> **{text}**" if alert else text)
            case Bullets(items):
                out.append("\n".join(f"- {item}" for item in items))
            case Table(header, rows):
                lines = [header, ["---"] * len(header), *rows]
                out.append("\n".join("| " + " | ".join(map(_md_cell, line)) + " |" for line in lines))
            case Image(src, alt):
                out.append(f"![{alt}]({src})")
            case Code(text, summary) if summary:
                out.append(
                    f"<details><summary>{html.escape(summary)}</summary>\n\n{_fence(text)}\n\n</details>"
                )
            case Code(text):
                out.append(_fence(text))
    return "\n\n".join(out) + "\n"


CSS = """
body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ccc;padding:.25rem .6rem;text-align:left}
td{white-space:pre-line;vertical-align:top}
th{background:#f3f3f3}pre{background:#f6f8fa;padding:.6rem;overflow-x:auto;white-space:pre-wrap}
.alert{background:#fff3cd;border-left:4px solid #d39e00;padding:.5rem .8rem;font-weight:bold}
img{max-width:100%;display:block;margin:.5rem 0}
"""


def _html_block(block: Block) -> str:
    esc = html.escape
    match block:
        case Heading(text, level):
            return f"<h{level}>{esc(text)}</h{level}>"
        case Para(text, alert):
            return f'<p class="alert">{esc(text)}</p>' if alert else f"<p>{esc(text)}</p>"
        case Bullets(items):
            return "<ul>" + "".join(f"<li>{esc(item)}</li>" for item in items) + "</ul>"
        case Table(header, rows):
            head = "".join(f"<th>{esc(cell)}</th>" for cell in header)
            body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
            return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        case Image(src, alt):
            return f'<img src="{esc(src)}" alt="{esc(alt)}">'
        case Code(text, summary) if summary:
            return f"<details><summary>{esc(summary)}</summary><pre>{esc(text)}</pre></details>"
        case Code(text):
            return f"<pre>{esc(text)}</pre>"
    raise TypeError(f"unknown block {block!r}")


def to_html(blocks: list[Block], title: str, lang: str = "en") -> str:
    """Render blocks as one self-contained HTML page (inline CSS; images are the run's plots/*.png)."""
    body = "\n".join(_html_block(block) for block in blocks)
    return (
        f'<!DOCTYPE html>\n<html lang="{html.escape(lang)}">\n<head>\n<meta charset="utf-8">\n<title>{html.escape(title)}</title>\n'
        f"<style>{CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n"
    )
