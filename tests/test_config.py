"""Campaign config loading: the shipped config, and one-line errors for malformed ones.

Every bad config must raise ConfigError with a message that is a single line,
names the offending key, and says what is allowed instead.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evo.config import ConfigError, load_config
from evo.core.family import load_family

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "configs" / "mhc_pre_big_fuse.yaml"


# ---------------------------------------------------------------------------
# The shipped config


def test_shipped_config_loads():
    cfg = load_config(SHIPPED)
    assert cfg.campaign == "mhc_pre_big_fuse"
    assert cfg.family.name == "mhc_pre_big_fuse"
    assert [g.name for g in cfg.geometries] == ["T4096_H4096", "T4096_H7168", "T1_H4096_S32"]
    assert [g.weight for g in cfg.geometries] == [1.0, 1.0, 0.0]
    assert dict(cfg.geometries[2].params) == {"T": 1, "H": 4096, "S": 32, "prenorm": False}
    assert cfg.budget.attempts == 150 and cfg.budget.minutes == 8.0
    assert cfg.proposer.name == "surrogate" and cfg.proposer.options == {}
    assert cfg.gates.correctness.mode == "exact" and cfg.gates.perf.rule == "weighted"
    assert cfg.backend == "auto" and cfg.clocks == "record" and cfg.peer.torch_compile == "default"


def test_shipped_config_storage_defaults_to_sqlite_under_logs():
    cfg = load_config(SHIPPED)
    ledger = ROOT / "logs" / "mhc_pre_big_fuse" / "ledger.db"
    assert cfg.storage == f"sqlite:///{ledger}"
    assert cfg.log_dir == ledger.parent


def test_storage_default_follows_campaign_name(tmp_path, monkeypatch):
    p = _write(tmp_path, _doc(campaign="other_one"))
    monkeypatch.chdir(tmp_path)
    cfg = load_config(p)
    # the ledger goes to logs/<campaign>/ under the directory evo runs in, and the log beside it
    assert cfg.storage == f"sqlite:///{tmp_path.resolve() / 'logs' / 'other_one' / 'ledger.db'}"
    assert cfg.log_dir == tmp_path.resolve() / "logs" / "other_one"


def test_overrides(tmp_path):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    cfg = load_config(_write(tmp_path, _doc()), backend_override="recorded", storage_override=url)
    assert cfg.backend == "recorded" and cfg.storage == url


# ---------------------------------------------------------------------------
# Building test configs: a small valid base, changed one top-level key at a time.

BASE = {
    "campaign": "t",
    "family": "mhc_pre_big_fuse",
    "geometries": "\n  - {name: a, T: 64, H: 4096, weight: 1}\n  - {name: b, T: 1, H: 4096, S: 32, weight: 0}",
    "budget": "{attempts: 5}",
}
DROP = object()


def _doc(**changes: object) -> str:
    """YAML text of BASE with top-level keys replaced (value = YAML text), added, or dropped (DROP)."""
    keys = {**BASE, **changes}
    return "".join(f"{k}: {v}\n" for k, v in keys.items() if v is not DROP)


def _geoms(*flows: str) -> str:
    return "".join(f"\n  - {f}" for f in flows)


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "configs" / "c.yaml"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def test_base_is_valid(tmp_path):
    cfg = load_config(_write(tmp_path, _doc()))
    assert [g.name for g in cfg.geometries] == ["a", "b"]
    assert cfg.budget.attempts == 5 and cfg.budget.minutes is None


def test_bare_off_is_torch_compile_off(tmp_path):
    # YAML 1.1 reads a bare `off` as false; the config must take it as the string "off".
    cfg = load_config(_write(tmp_path, _doc(peer="{torch_compile: off}")))
    assert cfg.peer.torch_compile == "off"


def test_geometry_defaults_and_generated_names(tmp_path):
    cfg = load_config(_write(tmp_path, _doc(geometries=_geoms("{T: 8, H: 128}"))))
    (g,) = cfg.geometries
    assert g.name == "T8_H128_S1_prenorm0" and g.weight == 1.0
    assert dict(g.params) == {"T": 8, "H": 128, "S": 1, "prenorm": False}


def test_start_genome(tmp_path):
    cfg = load_config(_write(tmp_path, _doc(start="{block: 512, meta: slice}")))
    assert cfg.start is not None and cfg.start["block"] == 512 and cfg.start["meta"] == "slice"
    assert cfg.start["vec"] == 16  # the rest is the baseline


def test_knob_restriction_narrows_the_space_the_campaign_searches(tmp_path):
    cfg = load_config(_write(tmp_path, _doc(knobs="{meta: [array], block: [512, 256]}")))
    assert cfg.family.knob("meta").values == ("array",)
    assert cfg.family.knob("block").values == (256, 512)  # the family's order, whatever the config's
    assert cfg.family.knob("vec").values == load_family("mhc_pre_big_fuse").knob("vec").values
    assert load_family("mhc_pre_big_fuse").knob("meta").values == ("array", "slice")  # the family is untouched
    from evo.search import PROPOSERS

    p = PROPOSERS["evolutionary"](cfg.family, cfg.geometries, {}, 0)
    seen: set[str] = {cfg.family.baseline().key}
    for _ in range(40):
        prop = p.propose([], seen)
        if prop is None:
            break
        assert prop.genome["meta"] == "array" and prop.genome["block"] in (256, 512)
        seen.add(prop.genome.key)


# ---------------------------------------------------------------------------
# Malformed configs: (id, YAML text, key the message must name, what it must say is allowed)

BAD = [
    # --- the file itself
    ("not_yaml", "campaign: t\n  family: x\n family: y\n", "c.yaml", "not valid YAML"),
    ("tab_indent", "campaign: t\ngeometries:\n\t- {T: 1}\n", "c.yaml", "not valid YAML"),
    ("top_level_list", "- campaign: t\n- family: mhc_pre_big_fuse\n", "top level", "expected a mapping"),
    ("empty_file", "", "top level", "expected a mapping"),
    ("unknown_top_key", _doc(colour="blue"), "colour", "allowed here: arch, backend"),
    # --- campaign and family
    ("missing_campaign", _doc(campaign=DROP), "campaign", "letters, digits"),
    ("campaign_slash", _doc(campaign="a/b"), "campaign", "allowed: letters, digits, _ . -"),
    ("campaign_dotdot", _doc(campaign="'..'"), "campaign", "not . or .."),  # would put the ledger outside logs/
    ("campaign_empty", _doc(campaign="''"), "campaign", "allowed: letters, digits"),
    ("campaign_not_string", _doc(campaign="[a]"), "campaign", "expected a string"),
    ("missing_family", _doc(family=DROP), "family", "required: a family's name, or a path"),
    ("unknown_family", _doc(family="nope"), "family", "(known: "),
    # --- geometries
    ("missing_geometries", _doc(geometries=DROP), "geometries", "required: list of shapes"),
    ("empty_geometries", _doc(geometries="[]"), "geometries", "non-empty list"),
    ("geometries_mapping", _doc(geometries="{T: 1, H: 64}"), "geometries", "non-empty list"),
    ("geometry_not_mapping", _doc(geometries=_geoms("4096")), "geometries[0]", "expected a mapping of T, H, S"),
    ("geometry_missing_T", _doc(geometries=_geoms("{H: 4096}")), "geometries[0].T", "missing"),
    (
        "geometry_unknown_key",
        _doc(geometries=_geoms("{T: 1, H: 64, W: 3}")),
        "geometries[0].W",
        "allowed here: H, S, T, name, prenorm, weight",
    ),
    ("T_string", _doc(geometries=_geoms("{T: '4096', H: 4096}")), "geometries[0].T", "expected an integer"),
    ("T_bool", _doc(geometries=_geoms("{T: true, H: 4096}")), "geometries[0].T", "expected an integer"),
    ("T_zero", _doc(geometries=_geoms("{T: 0, H: 4096}")), "geometries[0].T", "allowed: 1..1048576"),
    (
        "S_not_a_choice",
        _doc(geometries=_geoms("{T: 1, H: 4096, S: 3}")),
        "geometries[0].S",
        "allowed: 1, 2, 4, 8, 16, 32",
    ),
    (
        "H_not_multiple_of_64",
        _doc(geometries=_geoms("{T: 1, H: 4096}", "{T: 1, H: 100}")),
        "geometries[1]",
        "must be a multiple of 64",
    ),
    (
        "prenorm_with_split",
        _doc(geometries=_geoms("{T: 1, H: 4096, S: 32, prenorm: true}")),
        "geometries[0]",
        "takes S = 1 only",
    ),
    (
        "prenorm_not_bool",
        _doc(geometries=_geoms("{T: 1, H: 4096, prenorm: 1}")),
        "geometries[0].prenorm",
        "expected true/false",
    ),
    (
        "duplicate_names",
        _doc(geometries=_geoms("{name: x, T: 1, H: 64}", "{name: x, T: 2, H: 64}")),
        "geometries[1]",
        "listed twice",
    ),
    (
        "duplicate_generated_names",
        _doc(geometries=_geoms("{T: 1, H: 64}", "{T: 1, H: 64, S: 1}")),
        "geometries[1]",
        "listed twice",
    ),
    (
        "all_weights_zero",
        _doc(geometries=_geoms("{T: 1, H: 64, weight: 0}", "{T: 2, H: 64, weight: 0}")),
        "geometries",
        "needs a weight > 0",
    ),
    ("negative_weight", _doc(geometries=_geoms("{T: 1, H: 64, weight: -1}")), "geometries[0].weight", "allowed: >= 0"),
    (
        "weight_nan",
        _doc(geometries=_geoms("{T: 1, H: 64}", "{T: 2, H: 64, weight: .nan}")),
        "geometries[1].weight",
        "allowed: >= 0",
    ),
    # --- budget
    ("budget_missing", _doc(budget=DROP), "budget", "give attempts and/or minutes"),
    ("budget_empty", _doc(budget="{}"), "budget", "give attempts and/or minutes"),
    ("budget_attempts_zero", _doc(budget="{attempts: 0}"), "budget.attempts", "allowed: >= 1"),
    ("budget_attempts_float", _doc(budget="{attempts: 1.5}"), "budget.attempts", "expected an integer"),
    ("budget_minutes_negative", _doc(budget="{minutes: -3}"), "budget.minutes", "allowed: > 0"),
    ("budget_unknown_key", _doc(budget="{attempts: 5, hours: 1}"), "budget.hours", "allowed here: attempts, minutes"),
    ("budget_not_mapping", _doc(budget="150"), "budget", "expected a mapping"),
    # --- proposer
    ("unknown_proposer", _doc(proposer="{name: annealing}"), "proposer.name", "allowed: evolutionary, "),
    ("proposer_name_list", _doc(proposer="{name: [evolutionary]}"), "proposer.name", "allowed: evolutionary, "),
    (
        "proposer_option_unknown",
        _doc(proposer="{name: evolutionary, options: {temperature: 1}}"),
        "proposer.options.temperature",
        "allowed here: champion_bias, crossover, elite",
    ),
    (
        "proposer_option_out_of_range",
        _doc(proposer="{name: evolutionary, options: {crossover: 2.0}}"),
        "proposer.options.crossover",
        "allowed: 0.0..1.0",
    ),
    (
        "proposer_option_wrong_type",
        _doc(proposer="{name: evolutionary, options: {elite: many}}"),
        "proposer.options.elite",
        "expected an integer",
    ),
    (
        "random_takes_no_options",
        _doc(proposer="{name: random, options: {elite: 4}}"),
        "proposer.options.elite",
        "allowed here: ",
    ),
    # --- gates
    (
        "correctness_mode",
        _doc(gates="{correctness: {mode: fuzzy}}"),
        "gates.correctness.mode",
        "allowed: exact, tolerance",
    ),
    ("correctness_seeds", _doc(gates="{correctness: {seeds: 1}}"), "gates.correctness.seeds", "allowed: >= 3"),
    ("perf_rule", _doc(gates="{perf: {rule: any}}"), "gates.perf.rule", "allowed: every, weighted"),
    ("perf_confidence", _doc(gates="{perf: {confidence: 1.5}}"), "gates.perf.confidence", "<= 0.999"),
    ("gates_unknown_section", _doc(gates="{timing: {}}"), "gates.timing", "allowed here: correctness, perf, static"),
    (
        "static_spills_not_bool",
        _doc(gates="{static: {allow_new_spills: maybe}}"),
        "gates.static.allow_new_spills",
        "expected true/false",
    ),
    # --- storage, backend, clocks, arch
    ("storage_mysql_one_slash", _doc(storage="'mysql:/bad'"), "storage", "allowed: sqlite:///"),
    ("storage_ftp", _doc(storage="ftp://x"), "storage", "allowed: sqlite:///"),
    ("storage_trailing_newline", _doc(storage='"sqlite:///x.db\\n"'), "storage", "allowed: sqlite:///"),
    ("storage_not_string", _doc(storage="42"), "storage", "expected a string"),
    ("backend_tpu", _doc(backend="tpu"), "backend", "allowed: auto, gpu, recorded"),
    ("clocks_fast", _doc(clocks="fast"), "clocks", "allowed: record, lock"),
    ("lock_mhz_range", _doc(lock_sm_mhz=10), "lock_sm_mhz", "allowed: >= 100 and <= 5000"),
    ("arch_gfx", _doc(arch="gfx90a"), "arch", "allowed: auto or sm_XX"),
    ("seed_negative", _doc(seed=-1), "seed", "allowed: >= 0"),
    # --- start genome
    ("start_unknown_knob", _doc(start="{blok: 128}"), "start", "knobs: barrier, block"),
    ("start_knob_out_of_range", _doc(start="{block: 100}"), "start", "allowed: [128, 256, 512]"),
    ("start_not_mapping", _doc(start="[128]"), "start", "expected a mapping"),
    ("start_knob_int_for_bool", _doc(start="{warp0_stream: 1}"), "start.warp0_stream", "allowed: [False, True]"),
    ("start_knob_float_for_int", _doc(start="{block: 256.0}"), "start.block", "allowed: [128, 256, 512]"),
    # --- peer
    ("peer_turbo", _doc(peer="{torch_compile: turbo}"), "peer.torch_compile", "allowed: default, max-autotune, off"),
    ("peer_on", _doc(peer="{torch_compile: on}"), "peer.torch_compile", "allowed: default, max-autotune, off"),
    (
        "peer_unknown_key",
        _doc(peer="{eager: yes}"),
        "peer.eager",
        "allowed here: kernels, nvbench, nvbench_benchmark, torch_compile",
    ),
    # --- knob restrictions
    ("knobs_unknown", _doc(knobs="{colour: [red]}"), "knobs.colour", "allowed here: barrier, block"),
    ("knobs_bad_value", _doc(knobs="{block: [256, 1024]}"), "knobs.block", "allowed: 128, 256, 512"),
    ("knobs_bool_as_int", _doc(knobs="{warp0_stream: [0]}"), "knobs.warp0_stream", "allowed: False, True"),
    ("knobs_drop_baseline", _doc(knobs="{meta: [slice]}"), "knobs.meta", "baseline's value 'array'"),
    ("knobs_not_mapping", _doc(knobs="[meta]"), "knobs", "expected a mapping"),
    ("prefetch_word", _doc(worker="{prefetch: soon}"), "worker.prefetch", "allowed: auto or an integer 0..16"),
    (
        "early_rounds_too_many",
        _doc(gates="{perf: {rounds: 12, early_rounds: 12}}"),
        "gates.perf.early_rounds",
        "0 (off) or from 4 to rounds - 1",
    ),
    ("watched_slack_too_big", _doc(gates="{perf: {watched_slack: 0.6}}"), "gates.perf.watched_slack", "0.5"),
    ("ceiling_check_negative", _doc(gates="{perf: {ceiling_check: -1}}"), "gates.perf.ceiling_check", "0"),
]


def _assert_one_line(msg: str, key: str, allowed: str) -> None:
    assert "\n" not in msg and "\r" not in msg, f"message is not one line: {msg!r}"
    assert key in msg, f"message does not name {key!r}: {msg!r}"
    assert allowed in msg, f"message does not say {allowed!r}: {msg!r}"


@pytest.mark.parametrize("text, key, allowed", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_config(tmp_path, text, key, allowed):
    p = _write(tmp_path, text)
    with pytest.raises(ConfigError) as ei:
        load_config(p)
    _assert_one_line(str(ei.value), key, allowed)
    assert not (tmp_path / "logs").exists()  # loading never creates the campaign's folder


def test_missing_file(tmp_path):
    p = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as ei:
        load_config(p)
    _assert_one_line(str(ei.value), str(p), "no such config file")


def test_directory_is_not_a_config(tmp_path):
    with pytest.raises(ConfigError) as ei:
        load_config(tmp_path)
    _assert_one_line(str(ei.value), str(tmp_path), "is a folder: give its campaign YAML")


def test_bad_override(tmp_path):
    with pytest.raises(ConfigError) as ei:
        load_config(_write(tmp_path, _doc()), storage_override="ftp://x")
    _assert_one_line(str(ei.value), "storage", "allowed: sqlite:///")


def test_at_least_25_bad_configs():
    assert len(BAD) >= 25


def test_shipped_e2e_config_loads():
    """configs/mhc_pre_e2e.yaml: the H200 proxy profile and decode noise measured in one device call."""
    cfg = load_config("configs/mhc_pre_e2e.yaml")
    assert cfg.bound is not None and cfg.bound.profile.name == "h200_proxy.csv"
    assert cfg.bound.geometry == "T1_H4096_S1" and 0 < cfg.bound.noise_floor < 0.05
    assert cfg.e2e is not None and cfg.e2e.runs >= 2 and "evo.proxy" in cfg.e2e.command
