"""Malformed configs, profiles, patches, overrides and environments an outside tester would try.

Each is run against an existing campaign (in-process, through evo.cli.main): exit code 2, one line on stderr and no
traceback, and not one file written, changed or removed anywhere under the test's folder (the ledger included).
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from evo.cli import main

ROOT = Path(__file__).resolve().parent.parent
BASE = yaml.safe_load((ROOT / "configs/mhc_pre_big_fuse.yaml").read_text())
BASE.update(backend="recorded", budget={"attempts": 4})
PATCH = "Title: wider loads\nRationale: fewer instructions\n--- a/kernel.cu\n+++ b/kernel.cu\n@@ -1 +1 @@\n-a\n+b\n"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    home = tmp_path_factory.mktemp("inputs-campaign")
    cfg = home / "ok.yaml"
    cfg.write_text(yaml.safe_dump({**BASE, "storage": f"sqlite:///{home / 'camp' / 'ledger.db'}"}, sort_keys=False))
    assert main(["run", str(cfg), "--plain"]) == 0
    return home / "camp" / "ledger.db"


def _yaml(t: Path, **changes) -> str:
    raw = {**BASE, "storage": f"sqlite:///{t / 'camp' / 'ledger.db'}"}
    raw.update(changes)
    return yaml.safe_dump(raw, sort_keys=False)


def _write(t: Path, data: str | bytes, name: str = "bad.yaml") -> str:
    p = t / name
    p.write_bytes(data.encode() if isinstance(data, str) else data)
    return str(p)


def run(data_fn: Callable[[Path], str | bytes], *extra: str) -> Callable[[Path], list[str]]:
    return lambda t: ["run", _write(t, data_fn(t)), "--plain", *extra]


def _profile(t: Path, data: str | bytes, suffix: str = ".yaml") -> Callable[[Path], list[str]]:
    """A config whose bound: profile is ``data``."""

    def make(t: Path) -> list[str]:
        prof = _write(t, data, "prof" + suffix)
        return [
            "run",
            _write(t, _yaml(t, bound={"profile": prof, "kernel": "mhc_pre_big_fuse", "geometry": "T4096_H4096"})),
            "--plain",
        ]

    return make


GOOD_PROFILE = "kernels: {mhc_pre_big_fuse: 10.0, other: 90.0}\ndecode_noise_floor: 0.002\n"


def _e2e(command) -> Callable[[Path], list[str]]:
    def make(t: Path) -> list[str]:
        prof = _write(t, GOOD_PROFILE, "prof.yaml")
        return ["run", _write(t, _yaml(t, bound={"profile": prof}, e2e={"command": command})), "--plain"]

    return make


def _e2e_env(env) -> Callable[[Path], list[str]]:
    def make(t: Path) -> list[str]:
        prof = _write(t, GOOD_PROFILE, "prof.yaml")
        return [
            "run",
            _write(t, _yaml(t, bound={"profile": prof}, e2e={"command": ["python", "-m", "evo.proxy"], "env": env})),
            "--plain",
        ]

    return make


def _replace(old: str, new: str) -> Callable[[Path], str]:
    def make(t: Path) -> str:
        text = _yaml(t)
        assert old in text, old
        return text.replace(old, new, 1)

    return make


def _idea(data: bytes) -> Callable[[Path], list[str]]:
    return lambda t: ["idea", "add", "mhc_pre_big_fuse", _write(t, data, "x.patch")]


BOMB = (
    "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
    "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
)
LONG = "c" * 300

# (id, arguments from the test folder, what the line must say, environment)
CASES: list[tuple] = [
    # --- encodings and sizes
    ("latin1_config", run(lambda t: _yaml(t).encode() + "# café\n".encode("latin-1")), "not UTF-8 text"),
    (
        "latin1_value",
        run(lambda t: _yaml(t).replace("campaign: mhc_pre_big_fuse", "campaign: caf\xe9").encode("latin-1")),
        "not UTF-8 text",
    ),
    ("utf16_bom", run(lambda t: _yaml(t).encode("utf-16")), "UTF-16"),
    ("utf16_no_bom", run(lambda t: _yaml(t).encode("utf-16-le")), "NUL"),
    ("utf32", run(lambda t: _yaml(t).encode("utf-32")), "UTF-16"),
    ("binary", run(lambda t: bytes(range(256)) * 8), "NUL"),
    ("nul_in_text", run(lambda t: _yaml(t) + "seed: 1\x00\n"), "NUL"),
    ("high_bytes", run(lambda t: b"\xff\xfa\xfb" * 100), "not UTF-8"),
    ("huge_config", run(lambda t: _yaml(t) + "#" + "x" * (1 << 20) + "\n"), "bytes, more than"),
    ("truncated_utf8", run(lambda t: _yaml(t).encode() + "# é".encode()[:-1]), "not UTF-8"),
    # --- YAML that is not what it seems
    ("dup_top_key", run(lambda t: _yaml(t) + "campaign: other\n"), "duplicate key 'campaign'"),
    ("dup_seed", run(lambda t: _yaml(t) + "seed: 5\n"), "duplicate key 'seed'"),
    (
        "dup_in_flow",
        run(_replace("budget:\n  attempts: 4\n", "budget: {attempts: 4, attempts: 9}\n")),
        "duplicate key 'attempts'",
    ),
    (
        "dup_in_block",
        run(_replace("budget:\n  attempts: 4\n", "budget:\n  attempts: 4\n  attempts: 150\n")),
        "duplicate key 'attempts'",
    ),
    ("dup_geometry_key", run(_replace("  T: 4096\n", "  T: 4096\n  T: 1\n")), "duplicate key 'T'"),
    ("alias_bomb_env", run(lambda t: _yaml(t) + BOMB), "alias"),
    (
        "alias_simple",
        run(lambda t: _yaml(t).replace("budget:\n  attempts: 4\n", "budget: &b\n  attempts: 4\n") + "x: *b\n"),
        "alias (*b)",
    ),
    ("merge_key", run(_replace("budget:\n  attempts: 4\n", "budget:\n  <<: &m {attempts: 4}\n")), "not valid YAML"),
    (
        "merge_alias",
        run(
            lambda t: (
                "base: &base {attempts: 4}\n" + _yaml(t).replace("budget:\n  attempts: 4\n", "budget:\n  <<: *base\n")
            )
        ),
        "alias (*base)",
    ),
    # --- numbers: finite only
    ("weight_inf", run(_replace("weight: 1\n", "weight: .inf\n")), "not a finite number"),
    ("weight_minus_inf", run(_replace("weight: 1\n", "weight: -.inf\n")), "geometries[0].weight"),
    ("weight_big_float", run(_replace("weight: 1\n", "weight: 1.0e+400\n")), "not a finite number"),
    ("weight_huge_int", run(_replace("weight: 1\n", "weight: " + "9" * 400 + "\n")), "not a finite number"),
    ("minutes_inf", run(_replace("attempts: 4\n", "attempts: 4\n  minutes: .inf\n")), "budget.minutes"),
    ("minutes_nan", run(_replace("attempts: 4\n", "attempts: 4\n  minutes: .nan\n")), "budget.minutes"),
    ("attempts_huge", run(_replace("attempts: 4\n", "attempts: " + "9" * 30 + "\n")), "budget.attempts"),
    ("min_gain_nan", run(_replace("min_gain: 0.01", "min_gain: .nan")), "gates.perf.min_gain"),
    ("batch_ms_inf", run(_replace("batch_ms: 10.0", "batch_ms: .inf")), "gates.perf.batch_ms"),
    ("timeout_inf", run(_replace("timeout_s: 30", "timeout_s: .inf")), "worker.timeout_s"),
    ("sanitizer_timeout_nan", run(_replace("timeout_s: 60", "timeout_s: .nan")), "sanitizer.timeout_s"),
    (
        "tolerance_inf",
        run(lambda t: _yaml(t, gates={"correctness": {"mode": "tolerance", "tolerance_factor": float("inf")}})),
        "tolerance_factor",
    ),
    ("seed_huge", run(_replace("seed: 0", "seed: " + "9" * 30)), "seed"),
    ("seed_2_40", run(_replace("seed: 0", "seed: 1099511627776")), "seed"),
    # --- command-line overrides validated like the config
    ("cli_minutes_nan", lambda t: ["run", _write(t, _yaml(t)), "--minutes", "nan"], "--minutes > 0"),
    ("cli_minutes_inf", lambda t: ["run", _write(t, _yaml(t)), "--minutes", "inf"], "--minutes > 0"),
    ("cli_minutes_minus_inf", lambda t: ["run", _write(t, _yaml(t)), "--minutes=-inf"], "--minutes > 0"),
    ("cli_minutes_1e309", lambda t: ["run", _write(t, _yaml(t)), "--minutes", "1e309"], "--minutes > 0"),
    ("cli_attempts_huge", lambda t: ["run", _write(t, _yaml(t)), "--attempts", "10" + "0" * 15], "--attempts"),
    ("worker_minutes_nan", lambda t: ["worker", _write(t, _yaml(t)), "--minutes", "nan"], "--minutes > 0"),
    ("worker_attempts_zero", lambda t: ["worker", _write(t, _yaml(t)), "--attempts", "0"], "--attempts must be"),
    # --- names a file system must take
    ("campaign_300_chars", run(_replace("campaign: mhc_pre_big_fuse", "campaign: " + LONG)), "characters"),
    ("campaign_129_chars", run(_replace("campaign: mhc_pre_big_fuse", "campaign: " + "c" * 129)), "characters"),
    ("campaign_slash", run(_replace("campaign: mhc_pre_big_fuse", "campaign: a/b")), "cannot name a folder"),
    ("geometry_name_long", run(_replace("name: T4096_H4096", "name: " + LONG)), "geometries[0].name"),
    ("geometry_name_newline", run(_replace("name: T4096_H4096", 'name: "T4096\\nH4096"')), "printable"),
    ("geometry_name_control", run(_replace("name: T4096_H4096", 'name: "T4096\\x07"')), "printable"),
    (
        "storage_long_name",
        lambda t: ["run", _write(t, _yaml(t)), "--storage", f"sqlite:///{t}/{LONG}/l.db"],
        "longer than a file system takes",
    ),
    (
        "storage_long_path",
        lambda t: ["run", _write(t, _yaml(t)), "--storage", "sqlite:///" + "/".join(["d" * 200] * 25) + "/l.db"],
        "longer than",
    ),
    # --- commands: an argv list, never a shell
    ("e2e_sh_c", _e2e(["sh", "-c", "python -m evo.proxy; echo done"]), "sh -c runs a shell string"),
    ("e2e_bash_ec", _e2e(["bash", "-ec", "true"]), "bash -ec"),
    ("e2e_bin_sh", _e2e(["/bin/sh", "-c", "true"]), "sh -c"),
    ("e2e_env_sh", _e2e(["env", "A=1", "sh", "-c", "true"]), "sh -c"),
    ("e2e_string", _e2e("python -m evo.proxy | tee x"), "not a string"),
    ("e2e_nul_arg", _e2e(["python", "a\x00b"]), "NUL"),
    ("e2e_nested_arg", _e2e(["python", ["-m"]]), "e2e.command[1]"),
    ("proposer_sh_c", run(lambda t: _yaml(t, ideas={"proposer": {"command": ["sh", "-c", "cat"]}})), "sh -c"),
    ("proposer_zsh_c", run(lambda t: _yaml(t, ideas={"proposer": {"command": ["zsh", "-c", "cat"]}})), "zsh -c"),
    ("e2e_env_nul", _e2e_env({"A": "x\x00y"}), "NUL"),
    ("e2e_env_eq_name", _e2e_env({"A=B": "1"}), "without ="),
    ("e2e_env_inf", _e2e_env({"A": float("inf")}), "not a finite number"),
    ("e2e_env_nested", _e2e_env({"A": {"b": 1}}), "e2e.env.A"),
    ("e2e_env_list", _e2e_env({"A": [1, 2]}), "e2e.env.A"),
    # --- decode profiles
    (
        "profile_latin1",
        _profile(Path(), "kernels: {mhc_pre_big_fuse: 1.0}\n# caf\xe9\n".encode("latin-1")),
        "not UTF-8",
    ),
    ("profile_binary", _profile(Path(), bytes(range(256))), "NUL"),
    ("profile_utf16", _profile(Path(), GOOD_PROFILE.encode("utf-16")), "UTF-16"),
    ("profile_inf", _profile(Path(), "kernels: {mhc_pre_big_fuse: .inf, other: 1.0}\n"), "expected a time"),
    ("profile_nan", _profile(Path(), "kernels: {mhc_pre_big_fuse: .nan, other: 1.0}\n"), "expected a time"),
    ("profile_dup", _profile(Path(), "kernels: {mhc_pre_big_fuse: 1.0, mhc_pre_big_fuse: 2.0}\n"), "duplicate key"),
    ("profile_alias", _profile(Path(), "k: &k {mhc_pre_big_fuse: 1.0}\nkernels: *k\n"), "alias"),
    (
        "profile_csv_inf",
        _profile(Path(), "Name,Total Time (ns)\nmhc_pre_big_fuse,inf\nother,5\n", ".csv"),
        "not a finite time",
    ),
    ("profile_csv_binary", _profile(Path(), b"Name,Total Time (ns)\n\x00\x01\x02", ".csv"), "NUL"),
    ("profile_csv_latin1", _profile(Path(), "Name,Total Time (ns)\nk\xe9,5\n".encode("latin-1"), ".csv"), "UTF-8"),
    # --- idea patches: text, bounded
    ("idea_binary", _idea(b"\x00\x01" * 100), "NUL"),
    ("idea_latin1", _idea(PATCH.replace("fewer", "f\xe9wer").encode("latin-1")), "not UTF-8"),
    ("idea_huge", _idea(PATCH.encode() + b"+" + b"x" * (2 << 20) + b"\n"), "more than"),
    ("idea_utf16", _idea(PATCH.encode("utf-16")), "UTF-16"),
    # --- storages and environments
    (
        "storage_zero_length",
        lambda t: ["run", _write(t, _yaml(t)), "--storage", f"sqlite:///{_write(t, b'', 'z.db')}"],
        "empty file",
    ),
    ("storage_is_folder", lambda t: ["run", _write(t, _yaml(t)), "--storage", f"sqlite:///{t / 'camp'}"], "folder"),
    (
        "storage_garbage",
        lambda t: ["run", _write(t, _yaml(t)), "--storage", f"sqlite:///{_write(t, b'garbage' * 100, 'g.db')}"],
        "not a SQLite database",
    ),
    (
        "storage_is_config",
        lambda t: ["status", _write(t, _yaml(t)), "--storage", f"sqlite:///{t / 'bad.yaml'}"],
        "not a SQLite database",
    ),
    (
        "storage_dev_null",
        lambda t: ["run", _write(t, _yaml(t)), "--storage", "sqlite:////dev/null/x/l.db"],
        "/dev/null",
    ),
    (
        "storage_no_driver",
        lambda t: ["status", _write(t, _yaml(t)), "--storage", "mysql+nodriver://u@h/db"],
        "cannot open the storage",
    ),
    (
        "env_heartbeat_text",
        lambda t: ["run", _write(t, _yaml(t)), "--plain"],
        "EVO_HEARTBEAT_S",
        {"EVO_HEARTBEAT_S": "soon"},
    ),
    ("env_grace_negative", lambda t: ["status", _write(t, _yaml(t))], "EVO_GRACE_S", {"EVO_GRACE_S": "-5"}),
    ("env_heartbeat_zero", lambda t: ["log", _write(t, _yaml(t))], "EVO_HEARTBEAT_S", {"EVO_HEARTBEAT_S": "0"}),
    ("export_into_config", lambda t: ["export", _write(t, _yaml(t)), "-o", str(t / "bad.yaml")], "not a folder"),
    (
        "export_into_campaign",
        lambda t: ["export", _write(t, _yaml(t)), "-o", str(t / "camp")],
        "evo export did not write",
    ),
]


def _snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): (hashlib.md5(p.read_bytes()).hexdigest() if p.is_file() else "dir")
        for p in sorted(folder.rglob("*"))
    }


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_malformed_input_is_one_line_and_changes_nothing(case, recorded, tmp_path, monkeypatch, capsys):
    _, make, expect, *env = case
    for k, v in (env[0] if env else {}).items():
        monkeypatch.setenv(k, v)
    (tmp_path / "camp").mkdir()
    shutil.copyfile(recorded, tmp_path / "camp" / "ledger.db")
    monkeypatch.chdir(tmp_path)
    argv = make(tmp_path)
    before = _snapshot(tmp_path)
    rc = main(argv)
    out = capsys.readouterr()
    assert rc == 2, (rc, out.err[-2000:], out.out[-2000:])
    assert "Traceback" not in out.err + out.out
    lines = out.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("evo: "), out.err
    assert expect in lines[0], lines[0]
    assert len(lines[0]) < 600, lines[0]
    assert _snapshot(tmp_path) == before


def test_there_are_at_least_60_cases():
    assert len(CASES) >= 60
