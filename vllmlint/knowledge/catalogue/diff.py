"""What changed between two catalogued releases: the release notes vLLM does not write.

    d = diff(load("0.29.0"), load("0.30.0"))     # a plain dict (the JSON of `catalogue diff`)
    print(render_text(d))

Flags (added, removed, renamed: gone in B and exactly one added flag with the same help text,
as the index finds renames; default, choices, number of values, deprecation changed), the
`--no-` and alias spellings, environment variables (envs.py and the reads elsewhere), the JSON
config flags and their fields, KV connectors, NixlConnector extra-config keys, subcommands and
deprecated launch modules. Source positions (`at`, `line`) are not compared: they move every
release.
"""
from __future__ import annotations


def _set_diff(a, b) -> dict:
    a, b = set(a), set(b)
    return {"added": sorted(b - a), "removed": sorted(a - b)}


def _choices(a: dict, b: dict) -> dict | None:
    ca, cb = a.get("choices"), b.get("choices")
    if ca == cb or ca is None or cb is None:
        return None
    return {"added": [c for c in cb if c not in ca], "removed": [c for c in ca if c not in cb]}


def _flags(fa: dict, fb: dict) -> dict:
    added = [n for n in fb if n not in fa]
    removed = [n for n in fa if n not in fb]
    renamed = {}
    for name in removed:
        h = fa[name].get("h")
        same = [n for n in added if h and fb[n].get("h") == h]
        if len(same) == 1:
            renamed[name] = same[0]
    out = {"added": sorted(set(added) - set(renamed.values())),
           "removed": sorted(set(removed) - set(renamed)),
           "renamed": dict(sorted(renamed.items())),
           "default_changed": {}, "choices_changed": {}, "nargs_changed": {}, "deprecated": {},
           "undeprecated": [], "spellings": {}}
    for name in sorted(set(fa) & set(fb)):
        a, b = fa[name], fb[name]
        if a.get("default") != b.get("default"):
            out["default_changed"][name] = [a.get("default"), b.get("default")]
        ch = _choices(a, b)
        if ch:
            out["choices_changed"][name] = ch
        if a.get("n", 1) != b.get("n", 1):
            out["nargs_changed"][name] = [a.get("n", 1), b.get("n", 1)]
        if b.get("dep") and not a.get("dep"):
            out["deprecated"][name] = b["dep"]
        elif a.get("dep") and not b.get("dep"):
            out["undeprecated"].append(name)
        spell = _set_diff(a.get("alias", []) + a.get("neg", []), b.get("alias", []) + b.get("neg", []))
        if spell["added"] or spell["removed"]:
            out["spellings"][name] = spell
    return out


def _env(a: dict, b: dict) -> dict:
    ea, eb = a["env"], b["env"]
    read_a = set(ea) | set(a.get("env_adhoc", {}))
    read_b = set(eb) | set(b.get("env_adhoc", {}))
    out = {**_set_diff(read_a, read_b), "default_changed": {}, "choices_changed": {}, "deprecated": {}}
    for name in sorted(set(ea) & set(eb)):
        if ea[name].get("default") != eb[name].get("default"):
            out["default_changed"][name] = [ea[name].get("default"), eb[name].get("default")]
        ch = _choices(ea[name], eb[name])
        if ch:
            out["choices_changed"][name] = ch
        if eb[name].get("dep") and not ea[name].get("dep"):
            out["deprecated"][name] = eb[name]["dep"] + (f" (use {eb[name]['use']})" if eb[name].get("use") else "")
    return out


def _json(ja: dict, jb: dict) -> dict:
    cli_a = {f for f, j in ja.items() if j.get("cli")}
    cli_b = {f for f, j in jb.items() if j.get("cli")}
    out = {"flags": _set_diff(cli_a, cli_b), "fields": {}}
    for flag in sorted(cli_a & cli_b):
        fa, fb = ja[flag]["fields"], jb[flag]["fields"]
        d = {**_set_diff(fa, fb), "choices_changed": {}}
        for key in sorted(set(fa) & set(fb)):
            ch = _choices(fa[key], fb[key])
            if ch:
                d["choices_changed"][key] = ch
        if d["added"] or d["removed"] or d["choices_changed"]:
            out["fields"][flag] = d
    return out


def diff(a, b) -> dict:
    """What changed from catalogue `a` to catalogue `b` (Catalogue objects)."""
    da, db = a.data, b.data
    kva, kvb = da.get("kv", {}), db.get("kv", {})
    return {
        "from": {"name": a.name, "version": a.version},
        "to": {"name": b.name, "version": b.version},
        "flags": _flags(da["flags"], db["flags"]),
        "env": _env(da, db),
        "json": _json(da.get("json", {}), db.get("json", {})),
        "connectors": _set_diff(kva.get("connectors", []), kvb.get("connectors", [])),
        "nixl_extra_keys": _set_diff(kva.get("nixl_extra_keys", {}), kvb.get("nixl_extra_keys", {})),
        "subcommands": _set_diff(da.get("subcommands", []), db.get("subcommands", [])),
        "deprecated_modules": _set_diff(da.get("deprecated_modules", {}), db.get("deprecated_modules", {})),
        "notes": _notes(a, b),
    }


def _notes(a, b) -> dict:
    """The researched notes (notes.json) of every release after `a` up to `b`: what the
    generator does not see, with evidence."""
    from . import vkey
    from .notes import release_notes, released

    return {r: release_notes(r) for r in sorted(released(), key=vkey) if a.vtuple < vkey(r) <= b.vtuple}


def is_empty(d: dict) -> bool:
    def empty(v):
        if isinstance(v, dict):
            return all(empty(x) for x in v.values())
        return not v
    return all(empty(v) for k, v in d.items() if k not in ("from", "to", "notes"))


def _label(side: dict) -> str:
    return side["version"] if side["name"] == side["version"] else f"{side['name']} ({side['version']})"


def _short(text, limit: int = 60) -> str:
    text = "(none)" if text is None else str(text)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def render_text(d: dict) -> str:
    lines = [f"vLLM {_label(d['from'])} -> {_label(d['to'])}"]
    if is_empty(d):
        return lines[0] + ": nothing changed in flags, env vars, JSON fields or connectors" + _render_notes(d)

    def section(title: str, rows: list[str]) -> None:
        if rows:
            lines.append("")
            lines.append(f"{title} ({len(rows)})")
            lines.extend(f"  {r}" for r in rows)

    f = d["flags"]
    section("Flags added", f["added"])
    section("Flags removed", f["removed"])
    section("Flags renamed", [f"{old} -> {new}" for old, new in f["renamed"].items()])
    section("Flag defaults changed", [f"{n}: {_short(x)} -> {_short(y)}" for n, (x, y) in f["default_changed"].items()])
    section("Flag choices changed", [_choice_row(n, c) for n, c in f["choices_changed"].items()])
    section("Flags taking another number of values", [f"{n}: {x} -> {y}" for n, (x, y) in f["nargs_changed"].items()])
    section("Flags newly deprecated", [f"{n}: {_short(t, 90)}" for n, t in f["deprecated"].items()])
    section("Flags no longer deprecated", f["undeprecated"])
    section("Flag spellings (aliases, --no- forms) changed",
            [_choice_row(n, c) for n, c in f["spellings"].items()])
    e = d["env"]
    section("Env vars added", e["added"])
    section("Env vars removed", e["removed"])
    section("Env var defaults changed", [f"{n}: {_short(x)} -> {_short(y)}" for n, (x, y) in e["default_changed"].items()])
    section("Env var choices changed", [_choice_row(n, c) for n, c in e["choices_changed"].items()])
    section("Env vars newly deprecated", [f"{n}: {_short(t, 90)}" for n, t in e["deprecated"].items()])
    j = d["json"]
    section("JSON config flags added", j["flags"]["added"])
    section("JSON config flags removed", j["flags"]["removed"])
    rows = []
    for flag, fd in j["fields"].items():
        rows += [f"{flag} +{k}" for k in fd["added"]] + [f"{flag} -{k}" for k in fd["removed"]]
        rows += [_choice_row(f"{flag} {k}", c) for k, c in fd["choices_changed"].items()]
    section("JSON fields changed", rows)
    section("KV connectors", [f"+{c}" for c in d["connectors"]["added"]] + [f"-{c}" for c in d["connectors"]["removed"]])
    section("NixlConnector extra-config keys", [f"+{c}" for c in d["nixl_extra_keys"]["added"]]
            + [f"-{c}" for c in d["nixl_extra_keys"]["removed"]])
    section("Subcommands", [f"+{c}" for c in d["subcommands"]["added"]] + [f"-{c}" for c in d["subcommands"]["removed"]])
    section("Deprecated launch modules", [f"+{c}" for c in d["deprecated_modules"]["added"]]
            + [f"-{c}" for c in d["deprecated_modules"]["removed"]])
    return "\n".join(lines) + _render_notes(d)


def _render_notes(d: dict) -> str:
    """What each release in between changed that a deployment must know (researched by hand)."""
    lines = []
    for release, n in d.get("notes", {}).items():
        lines += ["", f"What vLLM {release} changed that a deployment must know (researched in its source: "
                      f"vllmlint/knowledge/catalogue/notes.json, which has the evidence)"]
        for c in n.get("changes", []):
            lines.append(f"  [{c['topic']}] {c['what']}")
            lines.extend(f"      {e}" for e in c.get("evidence", []))
        for name, e in n.get("env", {}).items():
            lines.append(f"  [env] {name}: {e['say']}")
        if n.get("vl101"):
            v = n["vl101"]
            lines.append(f"  [VL101] premise {'holds' if v['holds'] else 'no longer holds'}: {v['what']}")
            lines.extend(f"      {e}" for e in v.get("evidence", []))
    return "\n" + "\n".join(lines) if lines else ""


def _choice_row(name: str, c: dict) -> str:
    parts = [f"+{x}" for x in c["added"]] + [f"-{x}" for x in c["removed"]]
    return f"{name}: {' '.join(parts)}"


__all__ = ["diff", "is_empty", "render_text"]
