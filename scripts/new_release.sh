#!/usr/bin/env bash
# Release day: build a new vLLM release into the catalogue, the steps of
# .github/workflows/new-release.yml, runnable here too.
#
#   scripts/new_release.sh            # the newest release on the package index, when newer than the newest built in
#   scripts/new_release.sh 0.35.0     # that release (also one older than the newest: a missed one)
#
# The wheel comes from the package index pip is configured with (pip.conf, PIP_INDEX_URL,
# PIP_FIND_LINKS, PIP_NO_INDEX: a folder of wheels works), through `vllmlint catalogue add
# --builtin vllm==X.Y.Z`: pip downloads it, the same AST reader as every built-in release reads
# it, nothing of vLLM is imported.
#
# Environment:
#   PYTHON             the Python with vllmlint installed (default: .venv/bin/python, else python3)
#   CATALOGUE_OUT      the catalogue folder to write (default: the package's own, vllmlint/knowledge/catalogue)
#   NEW_RELEASE_TESTS  pytest arguments run after the update (default: the catalogue, migrate and
#                      rule tests); `none` runs none
#
# Writes vllm-X.json, modules/vllm-X.json and a rebuilt index.json into CATALOGUE_OUT, regenerates
# docs/rules/ (when CATALOGUE_OUT is the package's), runs the tests. Its last line on stdout is
# `new-release: X.Y.Z` (built in now) or `new-release: none` (nothing newer on the index).
# Exit: 0 done or nothing to do, 1 the tests failed (the catalogue is written), 2 the index or the
# wheel could not be read.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -n "${PYTHON:-}" ]; then PY=$PYTHON
elif [ -x .venv/bin/python ]; then PY=.venv/bin/python
else PY=python3
fi
PACKAGE_OUT=vllmlint/knowledge/catalogue
OUT=${CATALOGUE_OUT:-$PACKAGE_OUT}
TESTS=${NEW_RELEASE_TESTS:-tests/test_catalogue.py tests/test_catalogue_cmd.py tests/test_release_day.py tests/test_kvcatalogue.py tests/test_migrate_chain.py tests/test_rule_messages.py tests/test_fixtures.py}

# The newest release in OUT (its vllm-X.json files), by release number.
newest=$("$PY" - "$OUT" <<'EOF'
import sys
from pathlib import Path
from vllmlint.knowledge.versions import parse_version
names = [p.name[len("vllm-"):-len(".json")] for p in Path(sys.argv[1]).glob("vllm-*.json")]
print(max(names, key=parse_version) if names else "0.0.0")
EOF
)

version=${1:-}
if [ -z "$version" ]; then
    # what `catalogue add --latest` asks: the newest release on the index (no pre-releases)
    if ! version=$("$PY" -c 'from vllmlint.knowledge.catalogue.download import latest; print(latest("vllm"))'); then
        echo "new_release: cannot ask the package index for vLLM's releases" >&2
        exit 2
    fi
    if ! "$PY" -c 'import sys; from vllmlint.knowledge.versions import parse_version as p; sys.exit(0 if p(sys.argv[1]) > p(sys.argv[2]) else 1)' "$version" "$newest"; then
        echo "The newest vLLM release on the index, $version, is not newer than the newest built in ($newest)."
        echo "new-release: none"
        exit 0
    fi
fi
if [ -f "$OUT/vllm-$version.json" ]; then
    echo "vLLM $version is built in already ($OUT/vllm-$version.json)."
    echo "new-release: none"
    exit 0
fi

echo "== vLLM $version (newest built in: $newest): download and extract"
"$PY" -m vllmlint catalogue add --builtin -o "$OUT" "vllm==$version" || exit 2

if [ "$OUT" = "$PACKAGE_OUT" ]; then
    "$PY" scripts/gen_docs.py
fi

echo "== what changed from $newest to $version"
if [ "$OUT" = "$PACKAGE_OUT" ] && [ "$newest" != "0.0.0" ]; then
    "$PY" -m vllmlint catalogue diff "$newest" "$version" || true
fi

status=0
if [ "$TESTS" != "none" ]; then
    echo "== tests: $TESTS"
    # shellcheck disable=SC2086  # the list is pytest's arguments, split on purpose
    "$PY" -m pytest -q $TESTS || status=1
fi
echo "new-release: $version"
exit $status
