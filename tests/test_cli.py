"""The `evo` command, run as a subprocess: exit codes, one-line errors, and no damage on failure."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from evo.core.family import family_names, load_family

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "configs" / "mhc_pre_big_fuse.yaml"


def evo(tmp_path: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EVO_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.run(
        [sys.executable, "-m", "evo", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def config(tmp_path: Path, name: str = "c", **changes: str) -> tuple[Path, Path]:
    """The shipped config with its ledger in tmp_path and top-level keys replaced; returns (config, ledger)."""
    ledger = tmp_path / f"{name}.db"
    raw = {k: v for k, v in yaml.safe_load(SHIPPED.read_text()).items() if k not in changes}
    raw["storage"] = f"sqlite:///{ledger}"
    p = tmp_path / "configs" / f"{name}.yaml"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(yaml.safe_dump(raw, sort_keys=False) + "".join(f"{k}: {v}\n" for k, v in changes.items()))
    return p, ledger


def assert_usage_error(r: subprocess.CompletedProcess, expect: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr + r.stdout, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {r.stderr!r}"
    assert lines[0].startswith("evo: "), lines[0]
    assert expect in lines[0], lines[0]


def md5(p: Path) -> str:
    return hashlib.md5(p.read_bytes()).hexdigest()


# ---------------------------------------------------------------------------


def test_families_lists_every_knob(tmp_path):
    r = evo(tmp_path, "families")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    rows: dict[tuple[str, str], str] = {}  # (family, knob) -> its row: two families may share a knob's name
    family = None
    last = None
    for ln in r.stdout.splitlines():
        if ln.startswith("   "):  # a long cell's continuation line, under its column: part of the row above
            if last is not None:
                rows[last] += " " + ln.strip()
            continue
        if ln.startswith("  "):
            last = (family, ln.split()[0])
            rows[last] = ln
        else:
            family = ln.split(":")[0]
    for name in family_names():
        fam = load_family(name)
        assert any(ln.startswith(f"{name}: ") and "[shipped: " in ln for ln in r.stdout.splitlines()), r.stdout
        for k in fam.knobs:
            assert (name, k.name) in rows, f"knob {name}.{k.name} not listed:\n{r.stdout}"
            row = rows[(name, k.name)]
            assert ("bit-preserving" if k.exact else "may change bits") in row, row
            assert f"[{k.default}]" in row, row  # the default is marked
    assert "may change bits" in rows[("mhc_pre_big_fuse", "split_reduce")]
    assert "bit-preserving" in rows[("mhc_pre_big_fuse", "block")]


def test_no_command_exits_2(tmp_path):
    r = evo(tmp_path)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr + r.stdout
    assert "run" in r.stdout and "families" in r.stdout  # the help, so the user sees the commands


def test_every_command_is_one_entry_of_the_dispatch_table():
    """evo/cli/__init__.py's COMMANDS declares each subcommand's parser and what runs it, in `evo --help`'s order."""
    import argparse

    from evo.cli import COMMANDS, _parser

    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    on_a_campaign = ["run", "worker", "status", "log", "table", "export", "replay", "sanitize", "ablate", "peers"]
    on_a_campaign.append("selfcheck")
    others = ["families", "config", "check", "new", "idea", "ideas", "kt-cache", "completion"]
    assert list(sub.choices) == list(COMMANDS) == on_a_campaign + others
    for name, command in COMMANDS.items():  # the config is loaded for those that run on a campaign
        assert command.campaign == (name not in others), name


# (id, how to make the arguments from tmp_path, what the one stderr line must say)
FAILING = [
    ("missing_config", lambda t: ["run", str(t / "nope.yaml")], "no such config file"),
    ("unknown_family", lambda t: ["run", str(config(t, family="nope")[0])], "family: unknown family 'nope'"),
    ("bad_knob_in_start", lambda t: ["run", str(config(t, start="{blok: 128}")[0])], "start: unknown knob 'blok'"),
    ("knob_value_in_start", lambda t: ["run", str(config(t, start="{block: 100}")[0])], "allowed: [128, 256, 512]"),
    ("bad_yaml", lambda t: ["run", str(config(t, peer="{torch_compile: [")[0])], "not valid YAML"),
    ("attempts_zero", lambda t: ["run", str(config(t)[0]), "--attempts", "0"], "--attempts must be >= 1"),
    ("minutes_zero", lambda t: ["run", str(config(t)[0]), "--minutes", "0"], "--minutes > 0"),
    ("attempts_not_int", lambda t: ["run", str(config(t)[0]), "--attempts", "many"], "invalid int value"),
    ("backend_choice", lambda t: ["run", str(config(t)[0]), "--backend", "tpu"], "invalid choice: 'tpu'"),
    ("storage_override", lambda t: ["run", str(config(t)[0]), "--storage", "ftp://x"], "storage: 'ftp://x'"),
    ("run_without_config", lambda t: ["run"], "the following arguments are required: config"),
    ("unknown_subcommand", lambda t: ["frobnicate"], "invalid choice: 'frobnicate'"),
    ("unknown_option", lambda t: ["run", str(config(t)[0]), "--turbo"], "unrecognized arguments: --turbo"),
    ("status_no_ledger", lambda t: ["status", str(config(t)[0])], "has no ledger yet"),
    ("log_no_ledger", lambda t: ["log", str(config(t)[0])], "has no ledger yet"),
    ("selfcheck_bad_config", lambda t: ["selfcheck", str(config(t, clocks="fast")[0])], "clocks: 'fast'"),
]


@pytest.mark.parametrize("make_args, expect", [c[1:] for c in FAILING], ids=[c[0] for c in FAILING])
def test_failing_command_is_one_line_and_creates_nothing(tmp_path, make_args, expect):
    args = make_args(tmp_path)
    r = evo(tmp_path, *args)
    assert_usage_error(r, expect)
    # Nothing of a campaign appears: no ledger at the config's storage, no logs/<campaign>/ folder.
    assert not list(tmp_path.glob("*.db")), list(tmp_path.glob("*.db"))
    assert not (tmp_path / "logs").exists()


def test_failing_commands_leave_an_existing_campaign_alone(tmp_path):
    cfg, ledger = config(tmp_path, backend="recorded")
    r = evo(tmp_path, "run", str(cfg), "--attempts", "2", "--plain")
    assert r.returncode == 0, r.stderr
    assert ledger.is_file()
    before = md5(ledger)

    r = evo(tmp_path, "status", str(cfg))
    assert r.returncode == 0, r.stderr
    assert "2 recorded" in r.stdout

    # A bad override, a bad start knob, and a resume with different geometries all fail without writing.
    assert_usage_error(evo(tmp_path, "run", str(cfg), "--attempts", "0"), "--attempts must be >= 1")
    bad, _ = config(tmp_path, backend="recorded", start="{block: 100}")
    assert_usage_error(evo(tmp_path, "run", str(bad)), "start: knob block=100")
    changed, _ = config(tmp_path, backend="recorded", geometries="[{name: T4096_H4096, T: 4096, H: 4096}]")
    assert_usage_error(evo(tmp_path, "run", str(changed), "--attempts", "3", "--plain"), "different geometries")
    assert md5(ledger) == before


@pytest.mark.parametrize("width", [80, 150])
def test_families_rows_wrap_inside_their_columns(width):
    """Issue 43: a knob name over 14 characters or values over 28 pushed the row's columns out of line, and a long
    doc ran past the terminal; now each column is as wide as the family needs and a long cell wraps inside it."""
    from evo.cli.families import knob_lines
    from evo.core.family import Knob

    knobs = [
        Knob("a_very_long_knob_name_for_tiles", (16, 32, 64, 128, 256, 512, 1024, 2048), 64, True, "tile " * 40),
        Knob("vec", (4, 8), 8, False, "bytes per load"),
    ]
    lines = knob_lines(knobs, width)
    assert all(len(ln) <= width for ln in lines), lines
    firsts = [ln for ln in lines if ln.startswith("  ") and not ln.startswith("   ")]
    assert [ln.split()[0] for ln in firsts] == ["a_very_long_knob_name_for_tiles", "vec"]
    tags = {ln.index("bit-preserving") if "bit-preserving" in ln else ln.index("may change bits") for ln in firsts}
    assert len(tags) == 1  # the exactness column lines up
    assert "[64]" in "".join(lines) and sum("tile" in ln for ln in lines) > 1
