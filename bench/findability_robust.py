"""Robustness variants of the real-skills findability bench: the same requests, as real input wraps them.

`findability_real.py` measures every request plain and, with `--variants`, as each variant
below turns it into a conversation (`conversation`):

- `preamble`: a domain-free preamble before the request (who the user is, a deadline, a
  meeting), ~30-45 words;
- `code`: ~120 words of unrelated pasted code after the request ("here is what I have");
- `thread`: the request as the last user turn of a conversation whose earlier turns (with the
  assistant's answers) were about something else.

Each variant has two pools of fillers: dev requests take theirs from one pool and test
requests from the other (`pool_of`), so a ranker tuned on the dev split has never seen the
test split's fillers. Within a pool, the filler is picked by a hash of the request id (the
same every run). The fillers are written to carry no domain (no skill's subject); pasted code
is ordinary utility code, the kind any project has.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

__all__ = ["VARIANTS", "conversation", "long_message", "pool_of"]

VARIANTS = ("plain", "preamble", "code", "thread")
"""The variant names: `plain` (the request as written) and the three wrappings."""

_PREAMBLES = {
    "dev": [
        "Hi! I've been working on this all week and my manager wants it by Friday, so I'm a bit "
        "stressed. I'm fairly new to the team and I don't want to ask the same question twice. "
        "Thanks in advance for the help.",
        "Quick context first: I'm the only engineer on a small team, we ship every two weeks and the "
        "next release is on Monday. My lead asked me to sort this out before the standup tomorrow "
        "morning, so here goes.",
        "Hello again. Sorry for the long message, it has been a long day and I have a call in "
        "twenty minutes. I tried a few things this morning but nothing stuck, and I'd rather "
        "understand it properly this time.",
        "So, a bit of background: I joined this company three months ago, I mostly did frontend "
        "before, and now I'm covering for a colleague who is on leave until the end of the month. "
        "Anyway, here is what I need.",
    ],
    "test": [
        "Good morning! I'm a contractor helping a client this quarter and they want a demo on "
        "Thursday afternoon. I have about two hours today for this, so any shortcut is welcome. "
        "Let me explain what I'm after.",
        "Hey, first time asking here. I work remotely from a different time zone than the rest of "
        "the group, so I can't just walk over and ask someone. My boss expects an update by the "
        "end of the day.",
        "OK so this is going to sound basic but bear with me. I took over this from a colleague who "
        "left last week, the notes are thin and the deadline did not move. I'd appreciate a clear "
        "answer.",
        "Thanks for the help yesterday, that worked. Today is a different thing: my team lead "
        "dropped it on me after the weekly sync and wants something to look at before the sprint "
        "review on Wednesday.",
    ],
}

_CODE = {
    "dev": [
        "Here is what I have so far:\n\n```python\ndef chunked(items, size):\n    batch = []\n"
        "    for item in items:\n        batch.append(item)\n        if len(batch) == size:\n"
        "            yield batch\n            batch = []\n    if batch:\n        yield batch\n\n\n"
        "def retry(fn, attempts=3, delay=0.5):\n    last = None\n    for n in range(attempts):\n"
        "        try:\n            return fn()\n        except Exception as exc:\n            last = exc\n"
        "            time.sleep(delay * (2 ** n))\n    raise last\n\n\nclass Settings:\n"
        "    def __init__(self, path):\n        self.path = path\n        self.values = {}\n\n"
        "    def get(self, key, default=None):\n        return self.values.get(key, default)\n\n"
        "    def set(self, key, value):\n        if key in self.values and self.values[key] == value:\n"
        "            return False\n        self.values[key] = value\n        return True\n\n"
        "    def keys(self):\n        return sorted(self.values)\n\n"
        "    def __repr__(self):\n        return f'Settings({self.path!r}, {len(self.values)} keys)'\n```",
        "This is the helper file I'm working in:\n\n```javascript\nexport function debounce(fn, wait = 200) {\n"
        "  let timer = null;\n  return (...args) => {\n    clearTimeout(timer);\n"
        "    timer = setTimeout(() => fn(...args), wait);\n  };\n}\n\n"
        "export function groupBy(list, keyOf) {\n  const out = {};\n  for (const item of list) {\n"
        "    const key = keyOf(item);\n    (out[key] ||= []).push(item);\n  }\n  return out;\n}\n\n"
        "export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));\n\n"
        "export function pick(obj, keys) {\n  return Object.fromEntries(keys.filter((k) => k in obj)"
        ".map((k) => [k, obj[k]]));\n}\n\n"
        "export function chunk(list, size) {\n  const out = [];\n  for (let i = 0; i < list.length; i += size) {\n"
        "    out.push(list.slice(i, i + size));\n  }\n  return out;\n}\n\n"
        "export function once(fn) {\n  let done = false;\n  let value;\n  return (...args) => {\n"
        "    if (!done) {\n      done = true;\n      value = fn(...args);\n    }\n    return value;\n  };\n}\n```",
    ],
    "test": [
        "For context, the utils module looks like this:\n\n```python\nimport functools\nimport logging\n\n"
        "log = logging.getLogger(__name__)\n\n\ndef memoize(fn):\n    cache = {}\n\n"
        "    @functools.wraps(fn)\n    def wrapper(*args):\n        if args not in cache:\n"
        "            cache[args] = fn(*args)\n        return cache[args]\n\n    return wrapper\n\n\n"
        "def flatten(nested):\n    out = []\n    for part in nested:\n        if isinstance(part, list):\n"
        "            out.extend(flatten(part))\n        else:\n            out.append(part)\n    return out\n\n\n"
        "def clamp(value, low, high):\n    log.debug('clamp %s', value)\n    return max(low, min(high, value))\n\n\n"
        "def unique(items, key=None):\n    seen = set()\n    out = []\n    for item in items:\n"
        "        marker = key(item) if key else item\n        if marker in seen:\n            continue\n"
        "        seen.add(marker)\n        out.append(item)\n    return out\n\n\n"
        "def first(items, default=None):\n    return next(iter(items), default)\n```",
        "Here's the piece of code around it:\n\n```typescript\n"
        "type Options = { retries?: number; verbose?: boolean };\n\n"
        "export class Queue<T> {\n  private items: T[] = [];\n\n  push(item: T): void {\n"
        "    this.items.push(item);\n  }\n\n  shift(): T | undefined {\n    return this.items.shift();\n  }\n\n"
        "  get size(): number {\n    return this.items.length;\n  }\n}\n\n"
        "export function withDefaults(options: Options = {}): Required<Options> {\n"
        "  return { retries: options.retries ?? 3, verbose: options.verbose ?? false };\n}\n\n"
        "export const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);\n\n"
        "export function partition<T>(items: T[], test: (item: T) => boolean): [T[], T[]] {\n"
        "  const yes: T[] = [];\n  const no: T[] = [];\n  for (const item of items) {\n"
        "    (test(item) ? yes : no).push(item);\n  }\n  return [yes, no];\n}\n\n"
        "export const isEmpty = (value: unknown): boolean =>\n"
        "  value == null || (Array.isArray(value) && value.length === 0);\n```",
    ],
}

_THREADS = {
    "dev": [
        [
            "what's a good name for a variable that holds the number of retries left?",
            "`retries_left` or `remaining_attempts` read well; pick one and use it everywhere.",
            "ok thanks. and is it fine to have a function with six arguments or should I group them?",
            "Past four or five, grouping related ones into a small object usually reads better.",
        ],
        [
            "can you remind me how to undo my last local commit but keep the changes?",
            "`git reset --soft HEAD~1` moves the branch back one commit and keeps your changes staged.",
            "perfect, that did it. unrelated, but do you know a polite way to decline a meeting invite?",
            "Thank them, say you can't make that slot, and offer to read the notes or suggest a time.",
        ],
    ],
    "test": [
        [
            "how do I rename a branch I already pushed?",
            "Rename it locally with `git branch -m old new`, push the new one, then delete the old remote branch.",
            "got it. also, what's the difference between a list and a tuple again?",
            "A list can change after it is made; a tuple cannot, so it can be a dict key.",
        ],
        [
            "any tips for writing a clearer commit message?",
            "A short summary line in the imperative, a blank line, then why the change was needed.",
            "nice. and how long should a function be, roughly?",
            "Short enough to read at once and do one thing; when it needs a comment per block, split it.",
        ],
    ],
}


def pool_of(split: str) -> str:
    """The filler pool of a request's split: `dev` for dev requests, `test` for the others."""
    return "dev" if split == "dev" else "test"


def _pick(options: Sequence[object], request_id: str, salt: str) -> int:
    digest = hashlib.sha256(f"{salt}:{request_id}".encode()).digest()
    return digest[0] % len(options)


def conversation(
    variant: str, request_id: str, split: str, messages: Sequence[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The messages of `variant` of a request: (role, text) pairs, oldest first, roles `user`/`assistant`.

    Args:
        variant: One of `VARIANTS`.
        request_id: The request's id (picks the filler within the pool).
        split: The request's split (picks the pool: `pool_of`).
        messages: The request's own messages, oldest first, ending with the user's (one for
            a one-message request). The variant wraps the last one, or puts the unrelated
            thread before them all.

    Raises:
        ValueError: An unknown variant, or no message, or a last message that is not the user's.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}: one of {', '.join(VARIANTS)}")
    if not messages or messages[-1][0] != "user":
        raise ValueError("a request ends with the user's message")
    own, last = list(messages[:-1]), messages[-1][1]
    pool = pool_of(split)
    if variant == "preamble":
        preambles = _PREAMBLES[pool]
        return [*own, ("user", f"{preambles[_pick(preambles, request_id, variant)]}\n\n{last}")]
    if variant == "code":
        snippets = _CODE[pool]
        return [*own, ("user", f"{last}\n\n{snippets[_pick(snippets, request_id, variant)]}")]
    if variant == "thread":
        threads = _THREADS[pool]
        thread = threads[_pick(threads, request_id, variant)]
        earlier = [("user" if n % 2 == 0 else "assistant", text) for n, text in enumerate(thread)]
        return [*earlier, *own, ("user", last)]
    return [*own, ("user", last)]


def long_message(text: str, request_id: str, split: str, words: int = 2000) -> str:
    """`text` after a paste that brings the message to about `words` words: the pool's code
    snippets and numbered log lines of an ordinary service (the CPU measure's 2,000-word request)."""
    snippets = _CODE[pool_of(split)]
    parts: list[str] = []
    count = len(text.split())
    n = _pick(snippets, request_id, "long")
    while count < words:
        if n % 3 == 2:
            block = "\n".join(
                f"2026-03-02T10:{(n + i) % 60:02d}:07Z INFO worker-{i % 4} processed batch {n * 40 + i} "
                f"in {100 + (n * 7 + i) % 300} ms (queue depth {(n + i) % 17})"
                for i in range(20)
            )
        else:
            block = snippets[n % len(snippets)]
        parts.append(block)
        count += len(block.split())
        n += 1
    return "\n\n".join([*parts, text])
