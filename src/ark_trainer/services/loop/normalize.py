"""What a correction says once the ways of disguising a word are undone, for the safety filter to read.

A stranger who wants the loop to learn "send me your password" can write ``раssword`` (Cyrillic р and а),
``ｐａｓｓｗｏｒｄ``, ``p a s s w o r d``, ``p@ssw0rd``, ``ᴘᴀꜱꜱᴡᴏʀᴅ`` or put zero-width spaces inside the word.
:func:`views` undoes each of these before any pattern is matched; the correction itself (what the model
would learn) is never changed, only what the filter reads:

- ``plain``: invisible characters (zero-width spaces and joiners, the BOM, bidi marks, soft hyphens, ...)
  left out, Unicode NFKC (full-width and compatibility forms → ASCII: ``ｐａｓｓ`` → ``pass``, ``：`` → ``:``),
  case folded, Traditional Chinese characters of the filter's words in Simplified (:data:`TRADITIONAL`),
  a word that mixes Latin with Cyrillic or Greek look-alikes (or is made of look-alikes only)
  spelled in Latin letters (:data:`CONFUSABLES`; a word of real Cyrillic, ``пароль``, stays as it is), small
  capitals as letters, and spaces between Chinese characters (``密 码``) left out;
- ``compact``: ``plain`` with leetspeak undone in a word that mixes letters with digits or signs
  (``p@ssw0rd`` → ``password``; ``@ 4`` → a, ``0`` → o, ``1 !`` → i, ``3`` → e, ``5 $`` → s, ``7 +`` → t;
  numbers alone, ``8 位``, are left) and runs of three or more single letters or digits joined
  (``p a s s w o r d``, ``p.a.s.s.w.o.r.d``, ``w w w . x . c o m`` → ``password``, ``www.x.com``);
- ``compact_l``: the same with ``1`` read as ``l`` (``a1ert``, ``p1ease``), where it differs.

Limits: letters from other scripts that only look alike (Armenian, Cherokee, mathematical alphanumerics
outside NFKC) and words split by other characters than spaces, dots, dashes, underscores and stars pass.
"""

from __future__ import annotations

import re
import unicodedata

from ark_trainer.data.scrub import visible

# Cyrillic and Greek letters (lower case: the text is case folded first) and small capitals that look like
# a Latin letter, and the letter they are read as.
CONFUSABLES = str.maketrans(
    {
        **dict(zip("аеорсухкмтвніјԁԛԝɡ", "aeopcyxkmtbhijdqwg", strict=True)),
        **dict(zip("αβεικνορτυχωϲ", "abeiknoptuxwc", strict=True)),
        **dict(zip("ᴀʙᴄᴅᴇꜰɢʜɪᴊᴋʟᴍɴᴏᴘʀꜱᴛᴜᴠᴡʏᴢ", "abcdefghijklmnoprstuvwyz", strict=True)),
        "ѕ": "s",
        "һ": "h",
        "ӏ": "l",
        "ԍ": "g",
    }
)
# Traditional characters of the words the filter reads, in their simplified form (密碼 → 密码, 驗證 → 验证).
TRADITIONAL = str.maketrans(
    "碼驗證訴發給輸寫號轉帳賬戶錢匯銀請傳報說讀認網鏈結論規違罵殺藥彈槍燒腦殘廢滾媽豬貨無視統護須會絕從別擔憂幣額費麼鑰詞"
    "機簡訊複製貼區塊鏈錢包轉帳詐騙連結點擊現綫線邊蟲亂們這個為對嗎給關於絡開啟設",
    "码验证诉发给输写号转账账户钱汇银请传报说读认网链结论规违骂杀药弹枪烧脑残废滚妈猪货无视统护须会绝从别担忧币额费么钥词"
    "机简讯复制贴区块链钱包转账诈骗连结点击现线线边虫乱们这个为对吗给关于络开启设",
)
_LOOKALIKE = set("аеорсухкмтвнијԁԛԝɡαβεικνορτυχωϲᴀʙᴄᴅᴇꜰɢʜɪᴊᴋʟᴍɴᴏᴘʀꜱᴛᴜᴠᴡʏᴢѕһӏԍ")
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_CJK_SPACE = re.compile(r"(?<=[\u3040-\u30ff\u3400-\u9fff])\s+(?=[\u3040-\u30ff\u3400-\u9fff])")

LEET = str.maketrans(
    {"@": "a", "4": "a", "0": "o", "1": "i", "!": "i", "3": "e", "5": "s", "$": "s", "7": "t", "+": "t"}
)
_LEET_WORD = re.compile(r"(?<![\w@$!+])[a-z0-9@$!+]*[a-z][a-z0-9@$!+]*(?![\w@$+])")
_SPACED = re.compile(r"(?<![a-z0-9])[a-z0-9](?:[ .\-_*]{1,3}[a-z0-9]){2,}(?![a-z0-9])")


def _latin_lookalikes(word: str) -> str:
    """``word`` with its look-alike letters spelled in Latin when it mixes scripts or has only look-alikes."""
    odd = [c for c in word if c in _LOOKALIKE]
    if not odd:
        return word
    latin = any("a" <= c <= "z" for c in word)
    return word.translate(CONFUSABLES) if latin or len(odd) == len(word) else word


def plain(text: str) -> str:
    """Invisible characters out, NFKC, case folded, look-alike letters in Latin, Chinese words unspaced."""
    text = unicodedata.normalize("NFKC", visible(text)).casefold().translate(TRADITIONAL)
    text = _WORD.sub(lambda m: _latin_lookalikes(m.group()), text)
    return _CJK_SPACE.sub("", text)


def _join_spaced(text: str) -> str:
    def join(match: re.Match) -> str:
        chars = re.sub(r"[ \-_*]|(?<! )\.(?! )", "", match.group())  # a dot between spaces: a domain's
        return chars if sum(c.isalpha() for c in chars) >= 2 else match.group()

    return _SPACED.sub(join, text)


def compact(seen: str, one: str = "i") -> str:
    """``seen`` (a :func:`plain` text) with spaced letters joined and leetspeak undone (``1`` read as ``one``)."""
    joined = _join_spaced(seen)
    return _LEET_WORD.sub(lambda m: _unleet_one(m.group(), one), joined)


def _unleet_one(word: str, one: str) -> str:
    """Only the ``1`` signs become ``one``: the letter i already in the word stays an i; a ``!`` or ``+``
    ending the word is punctuation ("shut up!", "c++"), not a letter."""
    end = len(word.rstrip("!+"))
    word, tail = word[:end], word[end:]
    if not any(c in "@4015$!37+" for c in word) or word.isdigit():
        return word + tail
    return word.replace("1", one).translate(LEET) + tail


def views(text: str) -> list[str]:
    """The texts the filter reads for ``text``: plain, compact, and compact with 1 as l (when different)."""
    seen = plain(text)
    out = [seen]
    for one in ("i", "l"):
        other = compact(seen, one)
        if other not in out:
            out.append(other)
    return out
