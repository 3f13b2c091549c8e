"""A JSON reader that remembers where every member is, so a fix can remove or add one member
of a JSON value (`--kv-transfer-config '{...}'`) without re-serialising the rest."""
from __future__ import annotations

import json
from .record import record

Path = tuple


@record(frozen=True)
class Member:
    """Where one member of a JSON object is written: its key and its value."""
    key_start: int      # offset of the opening quote of the key
    value_start: int
    value_end: int      # offset just past the value

    # written out: built once per token or per file (record's generic __init__ costs ~1 us more)
    def __init__(self, key_start, value_start, value_end):
        d = self.__dict__                  # frozen: its own __setattr__ refuses
        d["key_start"] = key_start
        d["value_start"] = value_start
        d["value_end"] = value_end


@record
class Located:
    """A JSON value parsed with the offsets of its members and objects."""
    value: object
    members: dict[Path, Member]          # every object member, by key path
    objects: dict[Path, tuple[int, int]]  # every object's `{` and `}` offsets


class _Reader:
    def __init__(self, text: str):
        self.t, self.i = text, 0
        self.members: dict[Path, Member] = {}
        self.objects: dict[Path, tuple[int, int]] = {}

    def ws(self) -> None:
        while self.i < len(self.t) and self.t[self.i] in " \t\r\n":
            self.i += 1

    def value(self, path: Path):
        self.ws()
        if self.i >= len(self.t):
            raise ValueError("unexpected end of JSON")
        c = self.t[self.i]
        if c == "{":
            return self.obj(path)
        if c == "[":
            return self.arr(path)
        if c == '"':
            return self.string()
        dec = json.JSONDecoder()
        val, end = dec.raw_decode(self.t, self.i)
        self.i = end
        return val

    def string(self) -> str:
        val, end = json.decoder.scanstring(self.t, self.i + 1)
        self.i = end
        return val

    def obj(self, path: Path) -> dict:
        start = self.i
        self.i += 1
        out: dict = {}
        self.ws()
        if self.t[self.i:self.i + 1] == "}":
            self.i += 1
            self.objects[path] = (start, self.i - 1)
            return out
        while True:
            self.ws()
            if self.t[self.i:self.i + 1] != '"':
                raise ValueError(f"expected a key at character {self.i + 1}")
            key_start = self.i
            key = self.string()
            self.ws()
            if self.t[self.i:self.i + 1] != ":":
                raise ValueError(f"expected ':' at character {self.i + 1}")
            self.i += 1
            self.ws()
            value_start = self.i
            out[key] = self.value(path + (key,))
            self.members[path + (key,)] = Member(key_start, value_start, self.i)
            self.ws()
            c = self.t[self.i:self.i + 1]
            self.i += 1
            if c == "}":
                self.objects[path] = (start, self.i - 1)
                return out
            if c != ",":
                raise ValueError(f"expected ',' or '}}' at character {self.i}")

    def arr(self, path: Path) -> list:
        self.i += 1
        out: list = []
        self.ws()
        if self.t[self.i:self.i + 1] == "]":
            self.i += 1
            return out
        while True:
            out.append(self.value(path + (len(out),)))
            self.ws()
            c = self.t[self.i:self.i + 1]
            self.i += 1
            if c == "]":
                return out
            if c != ",":
                raise ValueError(f"expected ',' or ']' at character {self.i}")


def locate(text: str) -> Located:
    """Parse `text` as JSON (raises ValueError with a readable reason)."""
    try:
        json.loads(text)        # the standard reader decides validity and gives the error text
        reader = _Reader(text)
        value = reader.value(())
    except RecursionError:      # `[[[[...` thousands deep: a reason, not a crash
        raise ValueError("JSON nested too deeply") from None
    return Located(value, reader.members, reader.objects)


def member_removal(text: str, loc: Located, path: Path) -> tuple[int, int]:
    """Span that removes member `path` and one separating comma, keeping the rest intact."""
    m = loc.members[path]
    siblings = sorted(((p, mm) for p, mm in loc.members.items() if p[:-1] == path[:-1] and len(p) == len(path)),
                      key=lambda pm: pm[1].key_start)
    index = [p for p, _ in siblings].index(path)
    if index + 1 < len(siblings):
        return m.key_start, siblings[index + 1][1].key_start
    if index > 0:
        return siblings[index - 1][1].value_end, m.value_end
    return m.key_start, m.value_end
