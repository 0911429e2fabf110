"""Where compute-sanitizer's time goes on one step (issue 31's sanitizer cost), and whether reports of a
long-lived target come in order with its own marker lines. Usage: python probe.py OUTDIR"""
import json, os, subprocess, sys, time
from pathlib import Path
import yaml
from evo.sanitize import find_sanitizer, target_env, write_genome_file

out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
binary, why = find_sanitizer(); print("sanitizer", binary, why)
ver = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
(out / "version.txt").write_text(ver)
env = target_env()
champ = {"barrier":"late","block":128,"h_split":2,"meta":"slice","split_reduce":"serial","unroll":1,"vec":16,"warp0_stream":True}
gb = write_genome_file(out / "g-bigfuse.json", "mhc_pre_big_fuse", champ)
gf = write_genome_file(out / "g-fp4.json", "fp4_matvec", {'expand': 'mma', 'qload': 'tma', 'row_groups': 1, 'rows_per_block': 16, 'unroll': 1, 'warps': 8})
base = yaml.safe_load(open("configs/mhc_pre_big_fuse.yaml"))
def cfg_with(name, keep, weight_all=True):
    c = dict(base); gs = [dict(g) for g in base["geometries"] if g.get("name") in keep]
    for g in gs: g["weight"] = 1
    c["geometries"] = gs; p = out / f"cfg-{name}.yaml"; p.write_text(yaml.safe_dump(c)); return p
print([g.get("name") for g in base["geometries"]])
c_small = cfg_with("t1", {"T1_H4096_S32"})
c_one = cfg_with("t4096h4096", {"T4096_H4096"})
results = {}
def timed(name, argv, wait=True):
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    if not wait: return p, t0
    return finish(name, p, t0)
def finish(name, p, t0):
    lines = []
    for ln in p.stdout: lines.append(f"{time.monotonic()-t0:8.2f} {ln.rstrip()}")
    p.wait(); dur = round(time.monotonic() - t0, 2)
    (out / f"{name}.txt").write_text("\n".join(lines) + f"\nrc={p.returncode} wall={dur}\n")
    results[name] = dur; print(f"{name}: {dur} s rc={p.returncode}", flush=True); return dur
T = [sys.executable, "-m", "evo.sanitize_target"]
S = lambda tool, *extra: [binary, "--tool", tool, *extra]
bf = "configs/mhc_pre_big_fuse.yaml"
timed("plain-target", T + [bf, str(gb)])
timed("memcheck-target", S("memcheck") + T + [bf, str(gb)])
timed("racecheck-target", S("racecheck") + T + [bf, str(gb)])
null_torch = [sys.executable, "-c", "import torch; x=torch.zeros(1,device='cuda'); torch.cuda.synchronize(); print('ok')"]
null_cupy = [sys.executable, "-c", "import cupy; x=cupy.zeros(1); cupy.cuda.runtime.deviceSynchronize(); print('ok')"]
timed("plain-null-torch", null_torch)
timed("memcheck-null-torch", S("memcheck") + null_torch)
timed("racecheck-null-torch", S("racecheck") + null_torch)
timed("racecheck-null-cupy", S("racecheck") + null_cupy)
timed("racecheck-target-kns", S("racecheck", "--kernel-name", "kns=mhc") + T + [bf, str(gb)])
timed("memcheck-target-kns", S("memcheck", "--kernel-name", "kns=mhc") + T + [bf, str(gb)])
timed("racecheck-t1only", S("racecheck") + T + [str(c_small), str(gb)])
timed("racecheck-t4096h4096only", S("racecheck") + T + [str(c_one), str(gb)])
t0 = time.monotonic()
pa, ta = timed("par-memcheck", S("memcheck") + T + [bf, str(gb)], wait=False)
pb, tb = timed("par-racecheck", S("racecheck") + T + [bf, str(gb)], wait=False)
finish("par-memcheck", pa, ta); finish("par-racecheck", pb, tb)
results["parallel-wall"] = round(time.monotonic() - t0, 2); print("parallel wall", results["parallel-wall"])
# ordering: fp4 (race) then big-fuse (clean) in one racecheck process, marker lines after each sync
timed("racecheck-fp4-race", S("racecheck") + T + ["configs/fp4_matvec_pdl.yaml", str(gf)])
(out / "two.py").write_text('''
import sys
from evo import sanitize_target as st
print("MARK begin fp4", flush=True)
st.main(["configs/fp4_matvec_pdl.yaml", sys.argv[1]])
print("MARK end fp4", flush=True)
st.main(["configs/mhc_pre_big_fuse.yaml", sys.argv[2]])
print("MARK end bigfuse", flush=True)
st.main(["configs/fp4_matvec_pdl.yaml", sys.argv[1]])
print("MARK end fp4 again", flush=True)
''')
timed("racecheck-two-in-one", S("racecheck") + [sys.executable, str(out / "two.py"), str(gf), str(gb)])
(out / "times.json").write_text(json.dumps(results, indent=1))
