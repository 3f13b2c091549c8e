"""The speed work of issue 34 changes no byte a user sees.

Every command of bench/identity.py (`check` in four formats, `check --fix --diff`, `launches`,
`migrate --diff` one step and 24 steps, `migrate --report`, and a `migrate` that writes) runs with
the source of BASELINE, the last commit before that work, and with this tree, on the fixtures,
both generated corpora (small), ../shared/corpus and ../shared/redteam (the 24-step chain only
off ../shared: minutes per side there); exit status, stdout, stderr and written files must be equal.

BASELINE moves only when a change means to change what vllmlint writes (a new rule, a reworded
message): then set it to that change's commit, and say so in its message.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import identity  # noqa: E402

# d6c71f7: the last commit before issue 34's speed work; every output of 54e5a02 (that work,
# merged) was the same as its (CI, 2026-12-04). d6685fe means to change output (a requirements
# pin reaches scripts deeper than one folder, never a container's launch), and 951ea0f (a word
# that starts its line keeps the line's indentation when removed: one hunk of ../shared/corpus
# changed, `--disable-log-requests ${EXTRA_ARGS}` keeps its indent). Then, each found as a user
# and meant to change output: 100ef08 (a tag the repository builds gives its Dockerfile's
# release), 10092a2 (`true` under a secret-looking name is not masked in every message; two corpus
# files), 2c49d89 (an AIBrix fleet's Ray worker is no launch; one corpus file) and ada0d71 (a
# chart whose values schema refused the markers renders; one redteam chart) and 1277c90 (a
# .j2 that is not YAML is reported as a Jinja template). Then, found as a user on 2026-12-04 and
# meant to change output (every difference read, bench/identity.py against 13c483b): 6e7b38d (VL302
# names where --rope-scaling, --worker-use-ray, --cuda-graph-sizes went), b45ce41 (no fix in Python
# test code; aadb258's Rule.fixes_code keeps VL306's import moves there), f20b169 (brace-format
# templates read), 923f897 (engine keywords are field names), 571dc76/aadb258 (a descriptive dict
# key holds text), 7b1e451 (a chain from before the catalogue says so: gen2, redteam), afe25d1
# (pyproject.toml pins), 9401918 (vllm-cpu-env is vLLM's: one redteam launch says its tag
# names no release), 03196d0 (VL301 rewrites `-O.field` to `--compilation-config.field`) and
# 6779337 (SkyPilot `envs:` reach the launches of `run:`; two corpus launches list them) and
# 28a9d07 (a dstack `env:` list reaches its `commands:`: one corpus launch and one VL303 finding;
# a script's or Modal image's own `vllm==X` install is its release) and the Modal `image.env({...})`
# commit after it (two corpus Modal apps: VLLM_USE_V1 reported and removed by `migrate`), and
# e00e76b (production-stack values as Terraform templates: 13 redteam launches, their tags bumped),
# and a59d581 (migrate's "vLLM images named where no launch reads them" says pins when the places
# are pins: 5 outputs on fixtures and ../shared/corpus, that line only; nothing else differed
# against 284c9f2 on fixtures, corpus, redteam, gen, gen2), and 535952b (a KServe predictor runs
# the ServingRuntime it names: the fixture kserve-serving-runtime's predictor lists its runtime's
# env and name in `launches` and the migrate report; 0 differences on corpus and redteam against
# a52d64f), and 774d207 (found as a user on 2026-12-05, every difference read with a full diff
# against fb6dbe9: VL307 no longer advises an old default the target refuses (`builtin`, the V0
# scheduler class: fixtures, corpus, redteam, gen2); VL303 leaves unknown VLLM_* names set before
# a build of vLLM from source (one new fixture); migrate lists launches left behind (OPEA's
# vllm-cpu-release-repo images, AIBrix builds, rocm/vllm: fixtures, corpus, redteam) and, with
# --diff, places what is left on the files as they are on disk), and 03ffd0f (an args list read as
# vLLM's flags runs the vLLM image of the mapping above its own: one corpus values file,
# benhurjoel's example, gets release 0.19.0, its VL307 findings and its two tags bumped; nothing
# else differed against a489b8a on fixtures, corpus, redteam, gen, gen2), and 02e05ea (VL307's refused
# default says "that value"/"that class" instead of repeating it: those messages only), and 48e36cb
# (the second stop of 2026-12-05), and 7c5d141 (found as a user in the third stop of 2026-12-05,
# every difference read with full diffs 9504be6 -> 4504a91 -> 5c29722 -> 428b137 -> 7c5d141 on
# fixtures, corpus, redteam, gen, gen2: VL304 names the release that deprecated; VL303's unknown
# name drops "vLLM ignores it" and a plugin's image is not judged (25 OPEA Gaudi findings); VL307
# counts a positional model (gen2 -10, redteam -1); check sends a linked release to a hand bump;
# VL308 invalid-choice; `--diff` keeps a BOM; OPEA's variable images read (corpus +3, redteam +14
# launches) and a tag chosen at run time holds migrate's fixes (production-stack's per-model
# template, a Terraform template, two fixtures)), and ed363f0 (the fourth stop of 2026-12-05,
# every difference read with full diffs 7c5d141 -> e1856e6 -> af2281b -> 803fd48 on fixtures,
# corpus, redteam, gen, gen2; ed363f0 renames only: VL302 names a `--task` value's successor and an
# engine keyword as written (`swap_space`); VL303 leaves a plugin's OpenVINO image and a test's
# data alone and says what VLLM_USE_V1=0 chose; VL304 reports a chart template's module there;
# `--config FILE.yaml` options are read; and migrate keeps a tag or pin, and its launches'
# config, while an error no fix resolves is left for a human: only hunks removed, none added, on
# every tree (19 fixtures, 33 redteam files, most of gen2's old-flag launches)), and 9251c5a
# (read with a full diff ed363f0 -> 54e1daf: a kept place names the error's column; a launch
# already on the target is not kept (no bump to hold: 19 fixture hunks back, each one of those
# the policy had removed); a script beside a kept pin keeps its config), and ac97873 (read with a
# full diff 9251c5a -> ac97873: places written alike in one file are told apart by their rank, so
# one model entry's error no longer keeps another entry's tag): the baseline since.
BASELINE = "ac97873"


@pytest.fixture(scope="module")
def before(tmp_path_factory) -> Path:
    known = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{BASELINE}^{{commit}}"],
                           capture_output=True)
    if known.returncode != 0:
        pytest.skip(f"commit {BASELINE} is not in this clone (a shallow clone?)")
    return identity.export(BASELINE, tmp_path_factory.mktemp("before"))


@pytest.mark.parametrize("tree", ["fixtures", "gen", "gen2", "corpus", "redteam"])
def test_same_bytes_as_before_the_speed_work(before, tree):
    if tree in ("corpus", "redteam") and not (identity.SHARED / tree).is_dir():
        pytest.skip("../shared is not here")
    lines: list[str] = []
    differences = identity.compare(before, ROOT, [tree], count=6, log=lines.append)
    assert len(lines) >= len(identity.commands_for(tree)), lines       # every command ran on the tree
    assert not differences, "\n".join(differences)
