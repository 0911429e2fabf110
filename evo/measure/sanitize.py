"""The sanitizer pass: compute-sanitizer memcheck and racecheck on a campaign's champion.

The champion is built here (so a build error is a clear "failed", and the
target finds the cubins in the compile cache), then each tool runs
``python -m evo.sanitize_target <config> <genome file>`` under
``compute-sanitizer --tool <tool>``: an argv list, never a shell string, with
a time limit (``sanitizer.timeout_s``). The result per tool is one of

* ``clean``: the summary counts no errors and the target ran to the end;
* ``errors``: the summary counts errors (racecheck: hazards reported as errors);
* ``unavailable``: no compute-sanitizer binary, no GPU, or a device the tool
  does not support: not a failure of the kernel;
* ``timeout``: the time limit passed (the sanitizer and the target are killed);
* ``failed``: anything else (no summary, the target failed, the build failed).

The binary: ``EVO_SANITIZER`` when set, else ``compute-sanitizer`` on the PATH,
else /usr/local/cuda/bin/compute-sanitizer. The pass's result is kept in the
ledger meta under ``sanitizer`` (see :func:`sanitize_attempt`); evo/report/logmd.py
renders it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evo.core.records import SIMULATED_LABEL, simulated_label

# the statuses and the records handed to the sanitizer gate are core types: running the tools needs no judge
from evo.core.sanitizer_record import (
    CLEAN,
    ERRORS,
    FAILED,
    TIMEOUT,
    UNAVAILABLE,
    SanitizerRun,
    ToolReport,
    describe,
)

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
DEFAULT_TOOLS = ("memcheck", "racecheck")
DEFAULT_PATH = "/usr/local/cuda/bin/compute-sanitizer"
META_KEY = "sanitizer"
MAX_ERROR_LINES = 5
MAX_FINDINGS = 200  # top-level report lines kept for the gate (each must match a suppression)
ROOT = Path(__file__).resolve().parents[2]

# evo/sanitize_target.py's exit codes and its line prefix
TARGET_NO_GPU, TARGET_FAILED, TARGET_CRASH = 3, 4, 5
TARGET_PREFIX = "evo-sanitize-target:"

_ERROR_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+)\s+errors?")
_RACE_SUMMARY = re.compile(
    r"RACECHECK SUMMARY:\s*(\d+)\s+hazards?\s+displayed\s*\(\s*(\d+)\s+errors?\s*,\s*"
    r"(\d+)\s+warnings?\s*\)"
)
_PREFIX = re.compile(r"^=+ ?")
# Output that means the tool could not check this device at all (not a verdict on the kernel).
_UNAVAILABLE = (
    "device not supported",
    "no cuda-capable device",
    "cudaerrornodevice",
    "cuda_error_no_device",
    "cudaerrorinsufficientdriver",
)


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


@dataclass
class ToolResult:
    tool: str
    status: str  # clean | errors | unavailable | timeout | failed
    count: int | None = None  # errors in the summary (racecheck: hazards reported as errors)
    warnings: int | None = None  # racecheck's warnings (potential hazards); not counted as errors
    errors: list[str] = field(default_factory=list)  # the first few error lines
    findings: list[str] = field(default_factory=list)  # every top-level report line (up to MAX_FINDINGS)
    argv: list[str] = field(default_factory=list)
    version: str | None = None
    duration_s: float = 0.0
    reason: str = ""  # why, for every status but clean
    exit_code: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- finding and asking the binary ---------------------------------------------------
def find_sanitizer() -> tuple[str | None, str]:
    """(path, "") of the compute-sanitizer to use, or (None, why not)."""
    env = os.environ.get("EVO_SANITIZER")
    if env:
        if os.path.isfile(env) and os.access(env, os.X_OK):
            return env, ""
        found = shutil.which(env)
        if found:
            return found, ""
        return None, f"EVO_SANITIZER={env} is not an executable file"
    found = shutil.which("compute-sanitizer")
    if found:
        return found, ""
    if os.path.isfile(DEFAULT_PATH) and os.access(DEFAULT_PATH, os.X_OK):
        return DEFAULT_PATH, ""
    return None, f"compute-sanitizer not found (not on the PATH, not at {DEFAULT_PATH}; EVO_SANITIZER names another)"


def sanitizer_version(binary: str) -> str | None:
    try:
        r = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    text = r.stdout + r.stderr
    m = re.search(r"Version\s+(\S+)", text)
    if m:
        return m.group(1)
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return first[:80] or None


# --- reading its output -----------------------------------------------------------------
@dataclass
class Parsed:
    count: int | None  # None: no summary line
    warnings: int | None
    errors: list[str]
    findings: list[str] = field(default_factory=list, compare=False)


def parse_output(tool: str, text: str) -> Parsed:
    """The summary counts (the last summary line wins) and the first few reported problems."""
    count: int | None = None
    warnings: int | None = None
    race = _RACE_SUMMARY.findall(text)
    if tool == "racecheck" and race:
        _, errs, warns = race[-1]
        count, warnings = int(errs), int(warns)
    else:
        summ = _ERROR_SUMMARY.findall(text)
        if summ:
            count = int(summ[-1])
    findings = _problem_lines(text, MAX_FINDINGS)
    return Parsed(count, warnings, findings[:MAX_ERROR_LINES], findings)


def _problem_lines(text: str, limit: int = MAX_ERROR_LINES) -> list[str]:
    """Top-level reports ("Invalid __global__ write ...", "Error: Race reported ...") with their "at" line."""
    out: list[str] = []
    lines = text.splitlines()
    for i, ln in enumerate(lines):
        if not ln.startswith("="):
            continue
        body = _PREFIX.sub("", ln, count=1)
        if (
            not body
            or body[0].isspace()
            or body.startswith(("COMPUTE-SANITIZER", "ERROR SUMMARY", "RACECHECK SUMMARY", "LEAK SUMMARY"))
        ):
            continue
        where = ""
        if i + 1 < len(lines) and lines[i + 1].startswith("="):
            nxt = _PREFIX.sub("", lines[i + 1], count=1).strip()
            if nxt.startswith("at "):
                where = f" ({nxt[:200]})"
        out.append(body.strip()[:300] + where)
        if len(out) >= limit:
            break
    return out


def judge(tool: str, text: str, exit_code: int | None, timed_out: bool, limit_s: float) -> tuple[str, Parsed, str]:
    """(status, parsed counts, reason) from one tool's output and exit code."""
    p = parse_output(tool, text)
    low = text.lower()
    target_lines = [ln.split(TARGET_PREFIX, 1)[1].strip() for ln in text.splitlines() if TARGET_PREFIX in ln]
    last = target_lines[-1] if target_lines else ""
    if timed_out:
        return TIMEOUT, p, f"did not finish within {limit_s:g} s; the sanitizer and its target were killed"
    if not p.count:
        hit = next((pat for pat in _UNAVAILABLE if pat in low), None)
        if exit_code == TARGET_NO_GPU and TARGET_PREFIX in text:
            return UNAVAILABLE, p, f"the target cannot run here: {last or 'no CUDA GPU'}"
        if hit:
            line = next((ln for ln in text.splitlines() if hit in ln.lower()), hit)
            return UNAVAILABLE, p, f"the device refuses the tool: {_PREFIX.sub('', line.strip()).strip()[:200]}"
    if p.count:
        what = f"{p.count} error(s)" + (f", {p.warnings} warning(s)" if p.warnings else "")
        return ERRORS, p, f"{tool} reported {what}"
    if p.count is None:
        tail = last or next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), "(no output)")
        return FAILED, p, f"no {tool} summary in the output (exit code {exit_code}): {tail[:240]}"
    if exit_code != 0:
        return FAILED, p, f"the target failed (exit code {exit_code}): {last or 'no message'}"[:300]
    return CLEAN, p, ""


# --- running ------------------------------------------------------------------------------
def target_argv(config: Path, genome_file: Path) -> list[str]:
    return [sys.executable, "-m", "evo.sanitize_target", str(config), str(genome_file)]


def target_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    # torch's caching allocator would put every tensor inside one large cudaMalloc, out of memcheck's sight
    env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
    return env


def run_tool(
    binary: str,
    tool: str,
    target: Sequence[str],
    timeout_s: float,
    version: str | None = None,
    env: Mapping[str, str] | None = None,
    options: Sequence[str] = (),
) -> ToolResult:
    """One tool over the target, killed (with everything it started) past ``timeout_s``."""
    return run_tools(binary, [tool], target, timeout_s, version, env, options)[tool]


def run_tools(
    binary: str,
    tools: Sequence[str],
    target: Sequence[str],
    timeout_s: float,
    version: str | None = None,
    env: Mapping[str, str] | None = None,
    options: Sequence[str] = (),
    parallel: bool = False,
) -> dict[str, ToolResult]:
    """The tools over the target, one after another or (``parallel``) all at once: each its own process group,
    killed with everything it started past ``timeout_s`` from its own start; a stop request kills them all."""
    import threading

    from evo import stop

    env = dict(env) if env is not None else target_env()
    results: dict[str, ToolResult] = {}
    started: list[subprocess.Popen[str]] = []

    def start(tool: str) -> tuple[subprocess.Popen[str] | None, list[str], float]:
        argv = [binary, "--tool", tool, *options, *target]
        try:
            proc = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                env=env,
                start_new_session=True,
            )
        except OSError as e:
            results[tool] = ToolResult(
                tool, UNAVAILABLE, argv=argv, version=version, reason=f"{binary} could not start: {e}"
            )
            return None, argv, 0.0
        started.append(proc)
        return proc, argv, time.monotonic()

    kns = next((o[len("kns=") :] for o in options if o.startswith("kns=")), None)

    def collect(tool: str, proc: subprocess.Popen[str], argv: list[str], t0: float) -> None:
        try:
            timed_out = False
            try:
                out, _ = proc.communicate(timeout=max(0.0, timeout_s - (time.monotonic() - t0)))
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc.pid)
                out, _ = proc.communicate()
            dur = round(time.monotonic() - t0, 2)
            status, p, reason = judge(tool, out or "", proc.returncode, timed_out, timeout_s)
            if status == CLEAN and kns is not None:
                # a filter that matched none of the kernels launched would read "clean" on anything
                launched = [ln for ln in (out or "").splitlines() if TARGET_PREFIX in ln and " launched " in ln]
                if launched and not any(kns in ln for ln in launched):
                    status = FAILED
                    reason = (
                        f"the kernel filter kns={kns} matches none of the kernels the target launched "
                        f"({launched[0].split(TARGET_PREFIX, 1)[1].strip()[:160]}); "
                        "sanitizer.all_kernels: true checks all"
                    )
            results[tool] = ToolResult(
                tool, status, p.count, p.warnings, p.errors, p.findings, argv, version, dur, reason, proc.returncode
            )
        except Exception as e:  # in a collector thread: a result the gate can see, never a silently missing tool
            results[tool] = ToolResult(tool, FAILED, argv=argv, version=version, reason=f"evo could not read it: {e}")

    try:
        with stop.interruptible():  # only waiting on the tools: a stop request ends them at once
            if parallel:
                threads = []
                for tool in tools:
                    proc, argv, t0 = start(tool)
                    if proc is not None:
                        threads.append(threading.Thread(target=collect, args=(tool, proc, argv, t0), daemon=True))
                        threads[-1].start()
                for th in threads:
                    while th.is_alive():  # short joins: the main thread stays able to take a stop request
                        th.join(0.2)
            else:
                for tool in tools:
                    proc, argv, t0 = start(tool)
                    if proc is not None:
                        collect(tool, proc, argv, t0)
    except BaseException:
        # stopped (Ctrl-C, or SIGTERM from a `timeout` around evo): their own sessions would outlive us on the GPU
        for proc in started:
            if proc.poll() is None:
                _kill_group(proc.pid)
        raise
    return {t: results[t] for t in tools if t in results}


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)  # its own session: the target goes with it
    except ProcessLookupError:
        pass


def write_genome_file(
    path: Path, family: str, genome: Mapping[str, Any], ideas: Mapping[str, Any] | None = None, fault: str | None = None
) -> Path:
    """What the target builds: the genome, the records of the ideas it switches on, an optional fault."""
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"family": family, "genome": dict(genome), "ideas": dict(ideas or {}), "fault": fault}
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return path


def kernel_options(family: Any, all_kernels: bool) -> list[str]:
    """compute-sanitizer options that instrument only the family's kernel (``--kernel-name kns=<entry>``): the
    target's torch kernels (inputs, poison fills) then run as they are. On the H200 that took racecheck of one
    mhc_pre_big_fuse step from 20.06 s to 8.85 s (benchmarks/results/2026-12-02-sanitizer-cost)."""
    if all_kernels:
        return []
    # the identifier alone: a template's arguments and a namespace are not in its mangled name as written
    name = str(getattr(family, "entry", "") or "").split("<", 1)[0].strip().split("::")[-1]
    return ["--kernel-name", f"kns={name}"] if name else []


def run_pass(
    config: Path,
    genome_file: Path,
    tools: Sequence[str],
    timeout_s: float,
    binary: str | None = None,
    options: Sequence[str] = (),
    parallel: bool = False,
) -> dict[str, ToolResult]:
    """Every tool over the target; a missing binary makes every tool ``unavailable``."""
    why = ""
    if binary is None:
        binary, why = find_sanitizer()
    target = target_argv(config, genome_file)
    if binary is None:
        return {
            t: ToolResult(t, UNAVAILABLE, argv=["compute-sanitizer", "--tool", t, *options, *target], reason=why)
            for t in tools
        }
    version = sanitizer_version(binary)
    return run_tools(binary, tools, target, timeout_s, version, target_env(), options, parallel)


# --- a ledger attempt ----------------------------------------------------------------------
def _fault_of(attempt: Any) -> str | None:
    """selfcheck's fault attempts share the baseline's genome; their source is the named fault."""
    origin = getattr(attempt, "origin", "") or ""
    return origin[len("fault: ") :] if origin.startswith("fault: ") else None


def sanitize_attempt(
    cfg: Any, ledger: Any, attempt: Any, champion_id: int | None = None, out: Callable[[str], None] = print
) -> dict[str, Any]:
    """Build ``attempt``'s genome, run the configured tools over it, keep the result in the ledger meta."""
    from evo.search.ideas import campaign_book, idea_hook, idea_slugs
    from harness.build import Builder, BuildError

    sc = cfg.sanitizer
    genome = dict(attempt.genome)
    fault = _fault_of(attempt)
    slugs = idea_slugs(genome)
    book, _ = campaign_book(
        cfg.family, ledger.meta("ideas"), slugs, folder=cfg.ideas.folder if cfg.ideas is not None else True
    )
    record: dict[str, Any] = {
        "at": now(),
        "attempt_id": attempt.id,
        "champion_id": champion_id,
        "genome": genome,
        "fault": fault,
        "tools": {},
    }
    try:
        missing = [s for s in slugs if s not in book]
        if missing:
            raise BuildError(f"idea(s) {', '.join(missing)} are in neither the ledger nor the ideas folder")
        # Every geometry, as the campaign built it: the source hash then compares with the attempt's.
        builder = Builder.for_config(cfg, source_hook=idea_hook(book))
        built = builder.build(genome, cfg.family.faulty_source(fault) if fault else None)
    except (BuildError, ValueError, KeyError) as e:
        reason = f"the genome does not build: {' '.join(str(e).split())[:300]}"
        record["tools"] = {t: ToolResult(t, FAILED, reason=reason).to_dict() for t in sc.tools}
        ledger.set_meta(META_KEY, record)
        out(f"evo: sanitizer on #{attempt.id}: {reason}")
        return record
    # False: kernel.cu (or an idea) changed since the attempt was measured; the pass checks today's source.
    record["source_matches"] = built.source_sha256 == attempt.source_sha256 if attempt.source_sha256 else None
    gfile = write_genome_file(
        cfg.log_dir / "sanitize" / f"attempt-{attempt.id}.json",
        cfg.family.name,
        genome,
        {s: book[s].to_record() for s in slugs},
        fault,
    )
    results = run_pass(
        Path(cfg.path).resolve(),
        gfile.resolve(),
        sc.tools,
        sc.timeout_s,
        options=kernel_options(cfg.family, sc.all_kernels),
        parallel=sc.parallel,
    )
    record["tools"] = {t: r.to_dict() for t, r in results.items()}
    record["version"] = next((r.version for r in results.values() if r.version), None)
    ledger.set_meta(META_KEY, record)
    what = "champion " if champion_id == attempt.id else ""
    out(f"evo: sanitizer on {what}#{attempt.id}: " + "; ".join(_one_line(r) for r in results.values()))
    return record


def _one_line(r: ToolResult) -> str:
    s = f"{r.tool} {r.status}"
    if r.count is not None and r.status in (CLEAN, ERRORS):
        s += f" ({r.count} error(s)" + (f", {r.warnings} warning(s)" if r.warnings else "") + f", {r.duration_s:g} s)"
    if r.status != CLEAN and r.reason:
        s += f": {r.reason}"
    if r.errors:
        s += f"; first: {r.errors[0][:200]}"
    return s


def failed_tools(record: Mapping[str, Any] | None) -> list[str]:
    """Tools whose status says the kernel is wrong or could not be checked in time (errors, timeout, failed)."""
    tools = (record or {}).get("tools") or {}
    return [t for t, r in tools.items() if (r or {}).get("status") in (ERRORS, TIMEOUT, FAILED)]


def skip_reason(cfg: Any, backend_name: str, simulated: bool, label: str = SIMULATED_LABEL) -> str | None:
    """Why the after-run pass does not run on this machine (None: it runs); ``label``: where a simulated run's
    numbers come from (evo.core.records.simulated_label)."""
    if simulated or backend_name != "gpu":
        return f"the {backend_name} backend runs no kernel ({label}); compute-sanitizer needs the GPU backend"
    mode = cfg.sanitizer.enabled
    if mode == "off":
        return "sanitizer.enabled is off in the config"
    if mode == "auto":
        binary, why = find_sanitizer()
        if binary is None:
            return f"{why} (sanitizer.enabled: auto runs it only where it is installed)"
    return None


def run_step(
    cfg: Any,
    attempt: Any,
    ideas: Mapping[str, Any],
    backend_name: str,
    simulated: bool,
    source_variant: bool = False,
    out: Callable[[str], None] = print,
    label: str = SIMULATED_LABEL,
) -> SanitizerRun:
    """The configured tools over a step about to become the champion (its genome as built, with its ideas), for the
    sanitizer gate (gates/pipeline/sanitizer.py) to judge against the family's suppressions. Where no tool can run
    (recorded backend, no binary under enabled: auto, enabled: off) the run says why (the step passes, "not
    sanitizer-checked")."""
    why = skip_reason(cfg, backend_name, simulated, label)
    if why is None and source_variant:
        why = "a source variant (a fault or a replayed patch): the sanitizer target builds genomes and ideas only"
    if why is None and getattr(cfg, "path", None) is None:
        why = "the config has no file the sanitizer target could load"
    if why is not None:
        return SanitizerRun(skipped=why)
    fam = cfg.family
    genome = dict(attempt.genome)
    from evo.search.ideas import idea_slugs

    slugs = idea_slugs(genome)
    gfile = write_genome_file(
        cfg.log_dir / "sanitize" / f"step-{attempt.id}.json",
        fam.name,
        genome,
        {s: ideas[s].to_record() for s in slugs if s in ideas},
    )
    out(f"sanitizer: {', '.join(cfg.sanitizer.tools)} on #{attempt.id} before it may become the champion ...")
    sc = cfg.sanitizer
    results = run_pass(
        Path(cfg.path).resolve(),
        gfile.resolve(),
        sc.tools,
        sc.timeout_s,
        options=kernel_options(fam, sc.all_kernels),
        parallel=sc.parallel,
    )
    out(f"sanitizer on #{attempt.id}: " + "; ".join(_one_line(r) for r in results.values()))
    return SanitizerRun(
        [ToolReport.from_mapping(r.to_dict()) for r in results.values()],
        extra={
            "version": next((r.version for r in results.values() if r.version), None),
            "durations_s": {t: r.duration_s for t, r in results.items()},
        },
    )


def _already_checked(record: Mapping[str, Any] | None, attempt: Any, tools: Sequence[str]) -> bool:
    if not record or record.get("attempt_id") != attempt.id or record.get("genome") != dict(attempt.genome):
        return False
    got = record.get("tools") or {}
    return all((got.get(t) or {}).get("status") in (CLEAN, ERRORS) for t in tools)


def _skip(ledger: Any, reason: str, champion_id: int | None, out: Callable[[str], None], write: bool = True) -> None:
    out(f"evo: sanitizer skipped: {reason}")
    old = ledger.meta(META_KEY)
    if write and (not old or "skipped" in old):  # a skip never hides a pass that ran
        ledger.set_meta(META_KEY, {"at": now(), "champion_id": champion_id, "skipped": reason})


def after_run(
    cfg: Any, ledger: Any, backend_name: str, simulated: bool, stopped: str = "", out: Callable[[str], None] = print
) -> dict[str, Any] | None:
    """The pass `evo run` makes on a finished campaign's champion; returns the record when it ran."""
    from evo.core.records import BASELINE

    champ = ledger.champion()
    if simulated or backend_name != "gpu":  # nothing of a simulated campaign is written for the sanitizer
        label = simulated_label(ledger.meta("device") or {})  # (the backend's facts say whose measurements)
        said = skip_reason(cfg, backend_name, simulated, label) or ""
        _skip(ledger, said, champ.id if champ else None, out, write=False)
        return None
    if champ is None or champ.id == ledger.meta("baseline_id") or champ.verdict.status == BASELINE:
        _skip(ledger, "the champion is the baseline (no accepted step to check)", champ.id if champ else None, out)
        return None
    if stopped.startswith("interrupted"):
        _skip(ledger, "the run was interrupted (evo sanitize runs it on demand)", champ.id, out)
        return None
    why = skip_reason(cfg, backend_name, simulated)
    if why:
        _skip(ledger, why, champ.id, out)
        return None
    gated = (champ.verdict.detail or {}).get("sanitizer") or {}
    if gated.get("checked"):  # the sanitizer gate checked it before it became the champion
        _skip(
            ledger,
            f"champion #{champ.id} was checked by the sanitizer gate as it was accepted: {describe(gated)}",
            champ.id,
            out,
        )
        return None
    old = ledger.meta(META_KEY)
    if _already_checked(old, champ, cfg.sanitizer.tools):
        out(
            f"evo: sanitizer: champion #{champ.id} was already checked at {old.get('at')}: "
            + ", ".join(f"{t} {r.get('status')}" for t, r in old["tools"].items())
        )
        return old
    out(
        f"evo: sanitizer: {', '.join(cfg.sanitizer.tools)} on champion #{champ.id} "
        f"(up to {cfg.sanitizer.timeout_s:g} s each) ..."
    )
    return sanitize_attempt(cfg, ledger, champ, champ.id, out)
