"""The README a newcomer reads and the manual (a MkDocs site built from docs/): the README is
short and its two set-up commands are the ones CI runs; the site builds with --strict (a broken
link fails); the wheel and sdist build and pass `twine check`."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
IN_CI = os.environ.get("CI") == "true"


def _tool(module: str):
    """Skip locally without the docs/packaging tools; in CI (`.[test]` installs them) fail."""
    try:
        __import__(module)
    except ImportError:
        if IN_CI:
            raise
        pytest.skip(f"{module} is not installed (pip install -e '.[test]')")


def test_readme_is_short_and_starts_with_the_two_commands():
    assert len(README.splitlines()) <= 300
    blocks = re.findall(r"```bash\n(.*?)```", README, re.S)
    demo, tests = blocks[0].strip(), blocks[1].strip()
    assert demo == ("python3 -m venv .venv && .venv/bin/pip install -q . && "
                    ".venv/bin/vllmlint migrate --to 0.30.0 --diff fixtures/demo")
    assert tests == "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/python -m pytest"
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install -q -e '.[test]'" in ci and ".venv/bin/python -m pytest" in ci
    assert (ROOT / "fixtures" / "demo").is_dir()


def test_readme_says_nothing_that_does_not_work():
    assert "pip install vllmlint\n" not in README and "pip install vllmlint " not in README, "not on PyPI"
    assert "v0.1.0" not in README, "no such tag: pre-commit and the action name a commit SHA"
    assert "rev: " in README and "uses: vllmlint/vllmlint@" in README
    assert "vllmlint" in (ROOT / ".pre-commit-hooks.yaml").read_text()


def test_readme_links_resolve_and_list_every_rule():
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target
    from vllmlint.lint.registry import load_rules

    for code, cls in load_rules().items():
        assert re.search(rf"^\| {code} \| {cls.name} \| {cls.severity} \| {cls.fix} \|$", README, re.M), code


def test_manual_sections_are_in_the_readme_or_the_site():
    """What users look for is documented (tests that read the old README's sections read here)."""
    site = README + "".join(p.read_text() for p in (ROOT / "docs").glob("*.md"))
    for needle in ("pre-commit", "GitHub Actions", "GitLab", "Exit codes", "[tool.vllmlint]", "upload-sarif",
                   "--format github", "uses: vllmlint/vllmlint@", "--format gitlab", "codequality:",
                   "vllmlint server", "vim.lsp.start", "vim.lsp.enable", "lspconfig", "eglot",
                   "[language-server.vllmlint]", "glspc.server.command", "NO_COLOR", "FORCE_COLOR",
                   "could not be read", "--unsafe-fixes"):
        assert needle in site, needle
    dev = "".join(p.read_text() for p in (ROOT / "docs" / "development").glob("*.md"))
    assert "| PASS" in dev or "PASS" in dev, "bench tables live in docs/development/, not the README"
    assert "PASS" not in README and "MISS" not in README


def test_every_nav_page_exists_and_every_user_page_is_in_the_nav():
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    listed = []

    def walk(node):
        if isinstance(node, str):
            listed.append(node)
        elif isinstance(node, list):
            for n in node:
                walk(n)
        elif isinstance(node, dict):
            for v in node.values():
                walk(v)

    walk(config["nav"])
    assert all((ROOT / "docs" / p).is_file() for p in listed), [p for p in listed if not (ROOT / "docs" / p).is_file()]
    assert {f"rules/{p.name}" for p in (ROOT / "docs" / "rules").glob("VL*.md")} <= set(listed)


def _mkdocs(docs_root: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f",
                           str(docs_root / "mkdocs.yml"), "-d", str(site)],
                          capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def test_site_builds_strictly_and_a_broken_link_fails(tmp_path):
    _tool("mkdocs")
    _tool("material")
    built = _mkdocs(ROOT, tmp_path / "site")
    assert built.returncode == 0, built.stdout + built.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "rules" / "VL001" / "index.html").is_file()
    # the same tree with one broken link: --strict refuses it
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", copy / "docs")
    with open(copy / "docs" / "commands.md", "a") as fh:
        fh.write("\nSee [the missing page](no-such-page.md).\n")
    broken = _mkdocs(copy, tmp_path / "site2")
    assert broken.returncode != 0 and "no-such-page.md" in broken.stdout + broken.stderr


def test_wheel_and_sdist_build_and_pass_twine_check(tmp_path):
    _tool("build")
    _tool("twine")
    _tool("wheel")
    src = tmp_path / "src"       # a copy: the build's own build/ and egg-info stay out of the worktree
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", ".venv", ".vllm-venv", "build", "dist", "site",
                                                             "*.egg-info", "__pycache__", ".pytest_cache",
                                                             ".hypothesis", "bench", "tests"))
    dist = tmp_path / "dist"
    built = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(src)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    files = sorted(p.name for p in dist.iterdir())
    assert files == ["vllmlint-0.1.0-py3-none-any.whl", "vllmlint-0.1.0.tar.gz"], files
    checked = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, dist.iterdir())],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    import zipfile

    names = zipfile.ZipFile(dist / "vllmlint-0.1.0-py3-none-any.whl").namelist()
    assert "vllmlint/rules/vl001_scale_out_env_removed.py" in names
    assert any(n.startswith("vllmlint/knowledge/catalogue/") and n.endswith(".json") for n in names)
