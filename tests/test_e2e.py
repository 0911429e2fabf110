"""The end-to-end hook (evo/measure/e2e.py) and the built-in decode proxy (evo/proxy.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from evo.measure.e2e import (
    KERNEL_ONLY,
    MEASUREMENT_ERROR,
    OK,
    REJECTED,
    E2EError,
    compare_e2e,
    judge,
    normalize_command,
    parse_output,
    run_e2e,
    write_genome_file,
)

ROOT = Path(__file__).resolve().parent.parent
H1 = "a" * 64
H2 = "b" * 64
SMALL = ["--layers", "2", "--hidden", "512", "--tokens", "16"]


def script(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def printer(tps: str = "123.5", sha: str = H1) -> list[str]:
    return script(f"print('loading...'); print('tokens/s: {tps}'); print('sha256: {sha}')")


# --- run_e2e -------------------------------------------------------------


def test_ok_path():
    r = run_e2e(printer(), None, runs=3, timeout_s=60)
    assert r.tokens_per_s == [123.5, 123.5, 123.5]
    assert r.median == 123.5 and r.spread == 0.0 and r.hash == H1
    assert r.wall_s > 0 and len(r.run_wall_s) == 3


def test_genome_file_is_appended(tmp_path):
    gf = write_genome_file(tmp_path / "g.json", {"mhc_pre_big_fuse": {"meta": "slice"}})
    code = (
        "import sys, json, hashlib; a = sys.argv[1:]; i = a.index('--genome-file'); "
        "d = json.load(open(a[i + 1])); print('tokens/s: 7'); "
        "print('sha256:', hashlib.sha256(d['mhc_pre_big_fuse']['meta'].encode()).hexdigest())"
    )
    r = run_e2e(script(code), gf, runs=2, timeout_s=60)
    import hashlib

    assert r.hash == hashlib.sha256(b"slice").hexdigest()
    assert r.argv[-2:] == ["--genome-file", str(gf)]
    with pytest.raises(E2EError, match="no such file"):
        run_e2e(script(code), tmp_path / "missing.json", timeout_s=60)


def test_spread_and_median(tmp_path):
    counter = tmp_path / "n"
    code = (
        f"import pathlib; p = pathlib.Path({str(counter)!r}); n = int(p.read_text()) if p.exists() else 0; "
        f"p.write_text(str(n + 1)); print('tokens/s:', [100.0, 110.0, 90.0][n]); print('sha256: {H1}')"
    )
    r = run_e2e(script(code), None, runs=3, timeout_s=60)
    assert r.tokens_per_s == [100.0, 110.0, 90.0]
    assert r.median == 100.0
    assert r.spread == pytest.approx(0.2)


@pytest.mark.parametrize(
    "out, why",
    [
        ("print('hello')", "no 'tokens/s"),
        ("print('tokens/s: 5')", "no 'sha256"),
        (f"print('tokens/s: fast'); print('sha256: {H1}')", "garbled tokens/s"),
        (f"print('tokens/s: nan'); print('sha256: {H1}')", "garbled tokens/s"),
        (f"print('tokens/s: -3'); print('sha256: {H1}')", "garbled tokens/s"),
        ("print('tokens/s: 5'); print('sha256: xyz')", "garbled sha256"),
    ],
)
def test_garbage_output(out, why):
    with pytest.raises(E2EError, match=why) as e:
        run_e2e(script(out), None, timeout_s=60)
    msg = str(e.value)
    assert "\n" not in msg and sys.executable in msg


def test_nonzero_exit_names_last_stderr_line():
    code = "import sys; print('tokens/s: 1'); sys.stderr.write('first\\nCUDA error: out of memory\\n'); sys.exit(3)"
    with pytest.raises(E2EError, match=r"exit status 3; last stderr line: CUDA error: out of memory") as e:
        run_e2e(script(code), None, timeout_s=60)
    assert "\n" not in str(e.value)


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs a moment after it was sent SIGKILL (a zombie or no process: gone)."""
    import time

    for _ in range(50):  # a killed process may take a few ms to leave the run queue
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return False
        except FileNotFoundError:
            return False
        time.sleep(0.1)
    return True


def test_hang_times_out(tmp_path):
    code = (
        f"import os, sys, time; open({str(tmp_path / 'pid')!r}, 'w').write(str(os.getpid())); "
        "sys.stderr.write('loading weights\\n'); sys.stderr.flush(); time.sleep(600)"
    )
    with pytest.raises(E2EError, match=r"timed out after 2 s; last stderr line: loading weights"):
        run_e2e(script(code), None, runs=2, timeout_s=2)
    assert not _alive(int((tmp_path / "pid").read_text()))  # killed, not waited for


def test_hang_of_a_grandchild_is_ended_too(tmp_path):
    # The command starts a child that holds stdout open: the whole process group must go.
    code = (
        "import subprocess, sys, time; "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
        f"open({str(tmp_path / 'pid')!r}, 'w').write(str(p.pid)); time.sleep(600)"
    )
    with pytest.raises(E2EError, match="timed out"):
        run_e2e(script(code), None, timeout_s=2)
    assert not _alive(int((tmp_path / "pid").read_text()))  # the grandchild went with its group


def test_moving_hash(tmp_path):
    counter = tmp_path / "n"
    code = (
        f"import pathlib; p = pathlib.Path({str(counter)!r}); n = int(p.read_text()) if p.exists() else 0; "
        f"p.write_text(str(n + 1)); print('tokens/s: 10'); print('sha256:', [{H1!r}, {H2!r}][n % 2])"
    )
    with pytest.raises(E2EError, match="token stream hash moved between runs"):
        run_e2e(script(code), None, runs=2, timeout_s=60)


def test_str_argv_rejected():
    with pytest.raises(E2EError, match="argv list, not a string"):
        run_e2e(f"{sys.executable} -c 'print(1)'", None)
    with pytest.raises(E2EError, match="runs"):
        run_e2e(printer(), None, runs=1)
    with pytest.raises(E2EError, match="cannot start"):
        run_e2e(["/nonexistent/evo-e2e-command"], None, timeout_s=10)


def test_env_is_added():
    code = f"import os; print('tokens/s:', os.environ['EVO_E2E_T']); print('sha256: {H1}')"
    r = run_e2e(script(code), None, env={"EVO_E2E_T": "42"}, timeout_s=60)
    assert r.median == 42.0


def test_normalize_command():
    assert normalize_command(["python", "-m", "evo.proxy", "--tokens", 64]) == [
        sys.executable,
        "-m",
        "evo.proxy",
        "--tokens",
        "64",
    ]
    with pytest.raises(E2EError, match="e2e.command: give the command as a list"):
        normalize_command("python -m evo.proxy")
    with pytest.raises(E2EError, match=r"e2e.command\[1\]"):
        normalize_command(["python", {"a": 1}])


def test_compare_interleaves(tmp_path):
    log = tmp_path / "log"
    a, b = (
        write_genome_file(tmp_path / "a.json", {"f": {"k": 1}}),
        write_genome_file(tmp_path / "b.json", {"f": {"k": 2}}),
    )
    code = (
        f"import sys, json; k = json.load(open(sys.argv[-1]))['f']['k']; open({str(log)!r}, 'a').write(str(k)); "
        f"print('tokens/s:', 100 * k); print('sha256: {H1}')"
    )
    base, cand, gain = compare_e2e(script(code), a, b, runs=2, timeout_s=60)
    assert log.read_text() == "1221"
    assert base.median == 100 and cand.median == 200 and gain == pytest.approx(1.0)


def test_parse_output_takes_last_line():
    assert parse_output(f"tokens/s: 1\nsha256: {H2}\n  tokens/s:  2.5 \nsha256: {H1.upper()}\n") == (2.5, H1)


# --- judge ------------------------------------------------------------------


def test_judge_hash_mismatch_rejected():
    v, why = judge(0.01, 1.05, 0.007, H2, H1)
    assert v == REJECTED and "token stream changed" in why


def test_judge_overshoot_is_measurement_error():
    v, why = judge(0.08, 1.05, 0.007, H1, H1)  # +8% observed, bound +5%, floor 0.7%
    assert v == MEASUREMENT_ERROR and "never a win" in why
    # overshoot beats kernel-only: a bound under the floor with a big observed gain is still an error
    assert judge(0.03, 1.002, 0.007, H1, H1)[0] == MEASUREMENT_ERROR


def test_judge_kernel_only():
    v, why = judge(0.001, 1.0057, 0.007, H1, H1)
    assert v == KERNEL_ONLY and "no end-to-end claim" in why


def test_judge_ok_with_residual():
    v, why = judge(0.19, 1.209, 0.0065, H1, H1)  # the campaign's "stage once per block" step
    assert v == OK and "residual -1.90%" in why
    v, _ = judge(0.055, 1.05, 0.007, H1, H1)  # within the floor above the bound
    assert v == OK


# --- the decode proxy ---------------------------------------------------------


def _pythonpath() -> dict[str, str]:
    import os

    return {"PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}


def _proxy_inproc(args: list[str], capsys) -> tuple[float, str]:
    import torch

    from evo import proxy

    threads = torch.get_num_threads()
    try:
        rc = proxy.main(args)
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr()
    assert rc == 0, out.err
    return parse_output(out.out)


def test_proxy_reference_deterministic_and_seeded(capsys):
    tps0, h0 = _proxy_inproc(SMALL + ["--backend", "reference", "--seed", "0"], capsys)
    tps0b, h0b = _proxy_inproc(SMALL + ["--backend", "reference", "--seed", "0"], capsys)
    _, h1 = _proxy_inproc(SMALL + ["--backend", "reference", "--seed", "1"], capsys)
    assert tps0 > 0 and tps0b > 0
    assert h0 == h0b
    assert h1 != h0


def test_proxy_profile_share(tmp_path, capsys):
    from evo.measure.profile import load_profile

    prof_path = tmp_path / "prof.csv"
    _proxy_inproc(SMALL + ["--backend", "reference", "--profile-out", str(prof_path)], capsys)
    prof = load_profile(prof_path)
    s = prof.share("mhc_pre_big_fuse")
    assert 0.0 < s < 1.0
    assert "mhc_prenorm_gemm" in prof.times and "moe_block" in prof.times


def test_op_times_reads_kernel_time_not_gpu_spans():
    # key_averages() rows shaped as torch 2.11 gives them on CUDA (values illustrative):
    # a CPU-side row per range (device time = its attributed kernels), a GPU-side span per range (launch gaps
    # included), and the CuPy kernel's own row, which the profiler does not attribute to its range.
    from types import SimpleNamespace as R

    from evo.proxy import op_times

    rows = [
        R(key="embed", device_type="DeviceType.CPU", cpu_time_total=1736.0, device_time_total=50.2),
        R(key="embed", device_type="DeviceType.CUDA", cpu_time_total=0, device_time_total=782.5),
        R(key="mhc_prenorm_gemm", device_type="DeviceType.CPU", cpu_time_total=6210.4, device_time_total=289.6),
        R(key="mhc_pre_big_fuse", device_type="DeviceType.CPU", cpu_time_total=3251.0, device_time_total=8.9),
        R(key="mhc_pre_big_fuse", device_type="DeviceType.CUDA", cpu_time_total=0, device_time_total=250.3),
        R(key="mhc_pre_big_fuse", device_type="DeviceType.CUDA", cpu_time_total=0, device_time_total=250.3),
        R(key="moe_block", device_type="DeviceType.CPU", cpu_time_total=21167.3, device_time_total=1593.2),
        R(key="moe_block", device_type="DeviceType.CUDA", cpu_time_total=0, device_time_total=19462.9),
        R(key="aten::mm", device_type="DeviceType.CPU", cpu_time_total=1566.0, device_time_total=153.9),
    ]
    t = op_times(rows, cuda=True, kernel_rows=True)
    assert t["embed"] == 50.2 and t["moe_block"] == 1593.2 and t["mhc_pre_big_fuse"] == 250.3
    assert op_times(rows, cuda=True, kernel_rows=False)["mhc_pre_big_fuse"] == 8.9  # reference: torch ops only
    assert op_times(rows, cuda=False, kernel_rows=False)["moe_block"] == 21167.3


def test_proxy_usage_errors(tmp_path, capsys):
    from evo import proxy

    assert proxy.main(["--hidden", "500", "--backend", "reference"]) == 2
    assert "multiple of 64" in capsys.readouterr().err
    bad = tmp_path / "g.json"
    bad.write_text(json.dumps({"mhc_pre_big_fuse": {"meta": "nope"}}))
    assert proxy.main(SMALL + ["--backend", "reference", "--genome-file", str(bad)]) == 2
    assert "out of range" in capsys.readouterr().err
    bad.write_text(json.dumps({"mhc_pre_big_fuse": {"blocks": 8}}))
    assert proxy.main(SMALL + ["--backend", "reference", "--genome-file", str(bad)]) == 2
    assert "unknown knob 'blocks'" in capsys.readouterr().err
    bad.write_text("{not json")
    assert proxy.main(SMALL + ["--backend", "reference", "--genome-file", str(bad)]) == 2
    assert "not valid JSON" in capsys.readouterr().err


def test_run_e2e_on_the_proxy(tmp_path, capsys):
    gf = write_genome_file(tmp_path / "g.json", {"mhc_pre_big_fuse": {}, "other_family": {"x": 1}})
    argv = normalize_command(["python", "-m", "evo.proxy", *SMALL, "--backend", "reference"])
    r = run_e2e(argv, gf, runs=2, timeout_s=300, env=_pythonpath())
    assert len(r.tokens_per_s) == 2 and r.median > 0
    _, h = _proxy_inproc(SMALL + ["--backend", "reference"], capsys)
    assert r.hash == h


# --- GPU ----------------------------------------------------------------------------


@pytest.mark.gpu
def test_proxy_gpu_exact_knob_keeps_the_token_stream(tmp_path):
    base = write_genome_file(tmp_path / "base.json", {"mhc_pre_big_fuse": {}})
    slice_ = write_genome_file(tmp_path / "slice.json", {"mhc_pre_big_fuse": {"meta": "slice"}})
    argv = normalize_command(
        ["python", "-m", "evo.proxy", "--layers", "4", "--hidden", "4096", "--tokens", "32", "--backend", "gpu"]
    )
    env = _pythonpath()
    b, s, _gain = compare_e2e(argv, base, slice_, runs=2, timeout_s=300, env=env)
    assert b.hash == s.hash
    # a non-exact knob is allowed to move the stream, but the same genome must not
    assert run_e2e(argv, base, runs=2, timeout_s=300, env=env).hash == b.hash


@pytest.mark.gpu
def test_proxy_gpu_profile_share(tmp_path, capsys):
    from evo.measure.profile import load_profile

    prof_path = tmp_path / "prof.csv"
    _proxy_inproc(
        ["--layers", "2", "--hidden", "4096", "--tokens", "16", "--backend", "gpu", "--profile-out", str(prof_path)],
        capsys,
    )
    s = load_profile(prof_path).share("mhc_pre_big_fuse")
    assert 0.0 < s < 1.0
