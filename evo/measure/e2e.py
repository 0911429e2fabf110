"""The end-to-end hook: run a decode command, read its tokens/s and token-stream hash, judge the step.

A configured command (an argv list, never a shell string) is run at least
twice, with ``--genome-file <path>`` appended when a genome file is given (a
JSON file ``{family: {knob: value}}`` the command uses to pick its kernels).
It must print, anywhere on stdout, one line each of::

    tokens/s: <float>
    sha256: <64 hex digits>

(the last such line counts). Every run must print the same hash: a stream
that moves between runs of one build is a race or an uninitialised read,
never noise. ``python -m evo.proxy`` is a built-in command of this shape.

:func:`judge` then holds the observed decode gain against the share-derived
bound of the step (gates/bound.py): overshooting the bound by more than the
decode noise floor is a measurement error, never a win; a bound under the
floor means "kernel-only, no end-to-end claim".
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

OK, REJECTED, MEASUREMENT_ERROR, KERNEL_ONLY = "ok", "rejected", "measurement_error", "kernel_only"

_TPS_RE = re.compile(r"^\s*tokens/s:\s*(.*?)\s*$", re.MULTILINE)
_SHA_RE = re.compile(r"^\s*sha256:\s*(.*?)\s*$", re.MULTILINE)
_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")


class E2EError(Exception):
    """The end-to-end command failed or printed something unusable (one line, shown to the user)."""


@dataclass
class E2EResult:
    argv: list[str]  # the command as run (with --genome-file appended when given)
    tokens_per_s: list[float]  # one per run, in run order
    median: float
    spread: float  # (max - min) / median over the runs
    hash: str  # sha256 of the token stream, the same for every run
    wall_s: float  # wall seconds of all runs together
    run_wall_s: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def normalize_command(value: Any, where: str = "e2e.command") -> list[str]:
    """A config value -> argv list: a list of strings/numbers, first item ``python`` meaning this interpreter.

    A plain string is refused (no shell, no splitting guesses): raises E2EError naming ``where``.
    """
    if isinstance(value, str):
        raise E2EError(
            f"{where}: give the command as a list of arguments, e.g. [python, -m, evo.proxy], not a string ({value!r})"
        )
    if not isinstance(value, (list, tuple)) or not value:
        raise E2EError(f"{where}: expected a non-empty list of arguments, got {value!r}")
    out = []
    for i, a in enumerate(value):
        if isinstance(a, bool) or not isinstance(a, (str, int, float)):
            raise E2EError(f"{where}[{i}]: expected a string or number, got {a!r}")
        if isinstance(a, str) and "\x00" in a:
            raise E2EError(f"{where}[{i}]: a NUL character cannot be passed to a program")
        out.append(str(a))
    shell = shell_string(out)
    if shell:
        raise E2EError(
            f"{where}: {shell} runs a shell string, and evo never runs a shell: it starts the argv list "
            "itself (no pipes, ;, $VARS or globs); give the program and its arguments, e.g. [python, -m, "
            "evo.proxy, --tokens, 64], or put the shell lines in a script and give [bash, script.sh]"
        )
    if out[0] in ("python", "python3"):
        out[0] = sys.executable
    return out


SHELLS = (
    "sh",
    "bash",
    "dash",
    "zsh",
    "ksh",
    "mksh",
    "ash",
    "fish",
    "csh",
    "tcsh",
    "busybox",
    "cmd",
    "cmd.exe",
    "powershell",
    "pwsh",
)


def shell_string(argv: Sequence[str]) -> str | None:
    """'<shell> -c' when ``argv`` hands a command string to a shell (also behind env), else None."""
    i = 0
    if argv and os.path.basename(argv[0]) == "env":  # env [-i] [NAME=value ...] shell -c ...
        i = 1
        while i < len(argv) and (argv[i].startswith("-") or "=" in argv[i]):
            i += 1
    if i >= len(argv):
        return None
    prog = os.path.basename(argv[i])
    if prog not in SHELLS:
        return None
    for a in argv[i + 1 :]:  # the shell's own options, up to its script's name
        if re.fullmatch(r"-[A-Za-z]*c[A-Za-z]*|/c|/k|-Command|-EncodedCommand", a, flags=re.IGNORECASE):
            return f"{prog} {a}"
        if not a.startswith(("-", "+")):
            break
    if prog == "busybox" and len(argv) > i + 1 and argv[i + 1] in SHELLS:
        return shell_string(argv[i + 1 :])
    return None


def write_genome_file(path: str | Path, genomes: Mapping[str, Mapping[str, Any]]) -> Path:
    """Write ``{family: {knob: value}}`` for the command's ``--genome-file``; returns the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(
        json.dumps({f: dict(sorted(dict(g).items())) for f, g in genomes.items()}, indent=1, sort_keys=True) + "\n"
    )
    return p


def _check_argv(argv: Any) -> list[str]:
    if isinstance(argv, (str, bytes)):
        raise E2EError(f"e2e command must be an argv list, not a string ({argv!r}): no shell is used")
    if not isinstance(argv, (list, tuple)) or not argv or not all(isinstance(a, str) for a in argv):
        raise E2EError(f"e2e command must be a non-empty list of strings, got {argv!r}")
    return list(argv)


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "(no stderr)"


def _kill_group(proc: subprocess.Popen) -> None:
    """End the command and anything it started (it runs in its own process group)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass


def parse_output(stdout: str) -> tuple[float, str]:
    """(tokens/s, sha256) from a command's stdout; ValueError with the reason when missing or garbled."""
    tps_m = _TPS_RE.findall(stdout)
    sha_m = _SHA_RE.findall(stdout)
    if not tps_m:
        raise ValueError("no 'tokens/s: <float>' line on stdout")
    if not sha_m:
        raise ValueError("no 'sha256: <hex>' line on stdout")
    raw = tps_m[-1]
    try:
        tps = float(raw)
    except ValueError:
        raise ValueError(f"garbled tokens/s line: {raw[:80]!r} is not a number") from None
    if not math.isfinite(tps) or tps <= 0:
        raise ValueError(f"garbled tokens/s line: {raw[:80]!r} is not a positive finite number")
    h = sha_m[-1]
    if not _HEX64.match(h):
        raise ValueError(f"garbled sha256 line: {h[:80]!r} is not 64 hex digits")
    return tps, h.lower()


def _run_once(argv: list[str], timeout_s: float, env: Mapping[str, str] | None) -> tuple[float, str, float]:
    cmd = shlex.join(argv)
    full_env = dict(os.environ)
    if env:
        full_env.update({str(k): str(v) for k, v in env.items()})
    t0 = time.perf_counter()
    try:
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env, start_new_session=True
        )
    except OSError as e:
        raise E2EError(f"e2e command {cmd}: cannot start ({e.strerror or e})") from None
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        raise E2EError(
            f"e2e command {cmd}: timed out after {timeout_s:g} s; last stderr line: {_last_line(err or '')}"
        ) from None
    except BaseException:
        _kill_group(proc)
        proc.communicate()
        raise
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise E2EError(f"e2e command {cmd}: {_status(proc.returncode)}; last stderr line: {_last_line(err)}")
    try:
        tps, h = parse_output(out)
    except ValueError as e:
        raise E2EError(f"e2e command {cmd}: {e}; last stderr line: {_last_line(err)}") from None
    return tps, h, wall


def _status(rc: int) -> str:
    """How the command ended, as a user reads it: "exit status 3", "crashed (SIGSEGV)", "was ended by SIGKILL"."""
    if rc >= 0:
        return f"exit status {rc}"
    try:
        sig = signal.Signals(-rc).name
    except ValueError:
        return f"was ended by signal {-rc}"
    crash = -rc in (signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT)
    return f"crashed ({sig})" if crash else f"was ended by {sig}"


def _with_genome(argv: Sequence[str], genome_file: str | Path | None) -> list[str]:
    argv = _check_argv(argv)
    if genome_file is None:
        return argv
    p = Path(genome_file)
    if not p.is_file():
        raise E2EError(f"e2e genome file {p}: no such file")
    return argv + ["--genome-file", str(p)]


def _result(argv: list[str], samples: list[tuple[float, str, float]]) -> E2EResult:
    hashes = [h for _, h, _ in samples]
    if len(set(hashes)) > 1:
        raise E2EError(
            f"e2e command {shlex.join(argv)}: token stream hash moved between runs "
            f"({', '.join(h[:12] for h in hashes)})"
        )
    tps = [t for t, _, _ in samples]
    med = statistics.median(tps)
    walls = [w for _, _, w in samples]
    return E2EResult(
        argv, tps, med, (max(tps) - min(tps)) / med, hashes[0], round(sum(walls), 3), [round(w, 3) for w in walls]
    )


def run_e2e(
    argv: list[str], genome_file: Path | None, runs: int = 2, timeout_s: float = 600, env: dict | None = None
) -> E2EResult:
    """Run ``argv`` (+ ``--genome-file genome_file``) ``runs`` >= 2 times; tokens/s and the agreed hash.

    ``env`` adds to (does not replace) this process's environment. Raises E2EError (one line, with the
    command and its last stderr line) on a non-zero exit, a timeout, missing or garbled output, or a
    hash that differs between runs.
    """
    full = _with_genome(argv, genome_file)
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 2:
        raise E2EError(f"e2e runs: expected an integer >= 2 (a hash must repeat to mean anything), got {runs!r}")
    return _result(full, [_run_once(full, timeout_s, env) for _ in range(runs)])


def compare_e2e(
    argv: list[str],
    base_genome_file: Path | None,
    cand_genome_file: Path | None,
    runs: int = 2,
    timeout_s: float = 600,
    env: dict | None = None,
) -> tuple[E2EResult, E2EResult, float]:
    """Baseline and candidate runs interleaved (B C C B B C ...); returns (base, cand, observed gain).

    Interleaving spreads slow drift (clocks, heat, other tenants) over both sides. The gain is
    ``cand.median / base.median - 1``.
    """
    a, b = _with_genome(argv, base_genome_file), _with_genome(argv, cand_genome_file)
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 2:
        raise E2EError(f"e2e runs: expected an integer >= 2, got {runs!r}")
    sa: list[tuple[float, str, float]] = []
    sb: list[tuple[float, str, float]] = []
    for i in range(runs):
        order = ((a, sa), (b, sb)) if i % 2 == 0 else ((b, sb), (a, sa))
        for cmd, acc in order:
            acc.append(_run_once(cmd, timeout_s, env))
    base, cand = _result(a, sa), _result(b, sb)
    return base, cand, cand.median / base.median - 1.0


def observed_gain(base: E2EResult, cand: E2EResult) -> float:
    return cand.median / base.median - 1.0


def judge(observed_gain: float, bound: float, decode_floor: float, hash: str, frozen_hash: str) -> tuple[str, str]:
    """Hold an observed end-to-end gain against the step's share-derived bound ``bound`` (B >= 1).

    Returns (verdict, reason): ``rejected`` (token stream changed), ``measurement_error`` (observed
    gain above B - 1 + floor: overshoot is never a win), ``kernel_only`` (B - 1 under the floor: no
    end-to-end claim) or ``ok`` with the residual observed - (B - 1).
    """
    if hash != frozen_hash:
        return REJECTED, (
            f"token stream changed: sha256 {hash[:12]}… != frozen {frozen_hash[:12]}… "
            f"(the kernel changed what the model generates)"
        )
    room = bound - 1.0
    if observed_gain > room + decode_floor:
        return MEASUREMENT_ERROR, (
            f"observed {observed_gain:+.2%} decode overshoots the share-derived bound "
            f"{room:+.2%} by more than the noise floor {decode_floor:.2%}: a measurement "
            f"error, never a win"
        )
    if room < decode_floor:
        return KERNEL_ONLY, (
            f"kernel-only, no end-to-end claim: bound {room:+.2%} is under the decode noise floor "
            f"{decode_floor:.2%} (observed {observed_gain:+.2%})"
        )
    residual = observed_gain - room
    note = ""
    if residual < -decode_floor:
        note = " (below the bound by more than the floor: the gain did not fully reach decode)"
    return OK, (f"observed {observed_gain:+.2%} against bound {room:+.2%}: residual {residual:+.2%}{note}")
