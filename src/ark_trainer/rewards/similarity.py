"""Text-similarity metrics for the ``text_similarity`` grader, all in [0, 1] and all download-free.

Tokens: every CJK character is a token of its own (Chinese has no spaces), runs of letters/digits are one
token, other symbols are single tokens, and case is folded. ``fuzzy_match`` works on the raw characters.
"""

from __future__ import annotations

import difflib
import math
import re
from collections import Counter
from collections.abc import Callable

_TOKEN_RE = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]|[^\W_]+|[^\w\s]", re.UNICODE)


def tokens(text: str) -> list[str]:
    return _TOKEN_RE.findall(text.lower())


def fuzzy_match(hyp: str, ref: str) -> float:
    """difflib's similarity ratio of the two strings (1 = equal)."""
    if not hyp and not ref:
        return 1.0
    return difflib.SequenceMatcher(None, hyp, ref, autojunk=False).ratio()


def _f1(overlap: int, n_hyp: int, n_ref: int) -> float:
    if overlap == 0 or n_hyp == 0 or n_ref == 0:
        return 0.0
    precision, recall = overlap / n_hyp, overlap / n_ref
    return 2 * precision * recall / (precision + recall)


def token_f1(hyp: str, ref: str) -> float:
    """SQuAD-style bag-of-tokens F1."""
    h, r = tokens(hyp), tokens(ref)
    if not h and not r:
        return 1.0
    return _f1(sum((Counter(h) & Counter(r)).values()), len(h), len(r))


def _ngrams(seq: list[str], n: int) -> Counter:
    return Counter(tuple(seq[i : i + n]) for i in range(len(seq) - n + 1))


def rouge_n(hyp: str, ref: str, n: int) -> float:
    """ROUGE-N F-measure."""
    h, r = _ngrams(tokens(hyp), n), _ngrams(tokens(ref), n)
    return _f1(sum((h & r).values()), sum(h.values()), sum(r.values()))


def _lcs(a: list[str], b: list[str]) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b, start=1):
            cur.append(prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1]))
        prev = cur
    return prev[-1]


def rouge_l(hyp: str, ref: str) -> float:
    """ROUGE-L F-measure (longest common subsequence of tokens)."""
    h, r = tokens(hyp), tokens(ref)
    return _f1(_lcs(h, r), len(h), len(r))


def bleu(hyp: str, ref: str, max_n: int = 4) -> float:
    """Sentence BLEU-4 with add-one smoothing of the higher n-gram precisions (Lin & Och 2004)."""
    h, r = tokens(hyp), tokens(ref)
    if not h or not r:
        return 0.0
    log_sum = 0.0
    for n in range(1, max_n + 1):
        hn, rn = _ngrams(h, n), _ngrams(r, n)
        matches, total = sum((hn & rn).values()), max(sum(hn.values()), 0)
        if n == 1:
            if matches == 0:
                return 0.0
            log_sum += math.log(matches / total)
        else:
            log_sum += math.log((matches + 1) / (total + 1))
    brevity = 1.0 if len(h) > len(r) else math.exp(1 - len(r) / len(h))
    return brevity * math.exp(log_sum / max_n)


METRICS: dict[str, Callable[[str, str], float]] = {
    "fuzzy_match": fuzzy_match,
    "token_f1": token_f1,
    "bleu": bleu,
    "rouge_1": lambda h, r: rouge_n(h, r, 1),
    "rouge_2": lambda h, r: rouge_n(h, r, 2),
    "rouge_3": lambda h, r: rouge_n(h, r, 3),
    "rouge_4": lambda h, r: rouge_n(h, r, 4),
    "rouge_5": lambda h, r: rouge_n(h, r, 5),
    "rouge_l": rouge_l,
}
# OpenAI metrics that need an embedding model or WordNet, which would mean a download.
NEEDS_DOWNLOAD = ("cosine", "gleu", "meteor")
