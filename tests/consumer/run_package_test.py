#!/usr/bin/env python3
"""consumer.deb_packages (issue 19, item 1): the Debian packages CPack builds.

Builds them from the build tree (cpack -G DEB), then checks
  - that the four packages exist with the files each must hold (library, headers and CMake
    config, launcher with its Python package and ps-task behind a relative bin/ps-launch link,
    the apps);
  - their dependencies: each package that holds a binary depends on the Debian package that
    owns every system library the binary links (found with ldd and dpkg -S, not a fixed list),
    and the others on libps0 of the same version;
  - that apt-get can install them together on this Debian machine (apt-get --simulate: it
    resolves every dependency without changing the system);
  - that the unpacked packages work: the packaged ps-launch runs the packaged ps_countmin, a
    1-server 1-worker job, and its counts of a small stream are exact.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if r.returncode != 0:
        sys.exit("FAILED: %s exited with %d:\n%s" % (" ".join(cmd), r.returncode, r.stdout))
    return r.stdout


def owners(binary):
    """Debian packages (without the architecture) of the system libraries binary links itself
    (its NEEDED entries; what they link in turn their own packages pull)."""
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[(\S+)\]",
                            run(["readelf", "-d", binary])))
    found = set()
    for line in run(["ldd", binary]).splitlines():
        m = re.search(r"^\s*(\S+) => (/\S+)", line)
        if not m or m.group(1) not in needed or m.group(1).startswith("libps.so"):
            continue
        path = os.path.realpath(m.group(2))
        r = subprocess.run(["dpkg", "-S", path], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           text=True)
        if r.returncode != 0:  # /lib is a link to /usr/lib on Debian 12: ask for both
            alt = path.replace("/usr/lib/", "/lib/", 1)
            r = subprocess.run(["dpkg", "-S", alt], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
        if r.returncode == 0:
            found.add(r.stdout.split(":")[0].strip())
    return found


def depends(deb):
    text = run(["dpkg-deb", "-f", deb, "Depends"]).strip()
    return {d.strip().split(" ")[0]: d.strip() for d in text.split(",") if d.strip()}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True, help="the build tree (holds CPackConfig.cmake)")
    p.add_argument("--work", required=True)
    p.add_argument("--version", required=True)
    a = p.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    run(["cpack", "-G", "DEB", "--config", os.path.join(a.build, "CPackConfig.cmake"), "-B",
         a.work])
    debs = {}
    for deb in glob.glob(os.path.join(a.work, "ps_*.deb")):
        debs[run(["dpkg-deb", "-f", deb, "Package"]).strip()] = deb
    failures = []
    want = ["libps0", "libps-dev", "ps-tools", "ps-apps"]
    if sorted(debs) != sorted(want):
        sys.exit("FAILED: packages %s, want %s" % (sorted(debs), want))
    arch = run(["dpkg", "--print-architecture"]).strip()
    contents = {}
    for name, deb in debs.items():
        contents[name] = run(["dpkg-deb", "-c", deb])
        print("%s depends on %s" % (os.path.basename(deb), ", ".join(sorted(depends(deb).values()))))
    must = {
        "libps0": [r"usr/lib/\S*libps\.so\.0 -> ", r"usr/lib/\S*libps\.so\.%s\b" % re.escape(a.version)],
        "libps-dev": [r"usr/include/ps/ps\.h", r"usr/include/ps/kv_worker\.h",
                      r"usr/lib/\S*libps\.so -> ", r"usr/lib/\S*cmake/ps/ps-config\.cmake",
                      r"usr/lib/\S*cmake/ps/ps-targets\.cmake"],
        "ps-tools": [r"usr/bin/ps-launch -> \.\./share/ps/tracker/ps-launch",
                     r"usr/share/ps/tracker/ps-task", r"usr/share/ps/tracker/pslaunch/local\.py",
                     r"usr/bin/ps_sim"],
        "ps-apps": [r"usr/bin/ps_linear", r"usr/bin/ps_lda", r"usr/bin/ps_countmin",
                    r"usr/bin/ps_server"],
    }
    for name, patterns in must.items():
        for pat in patterns:
            if not re.search(pat, contents[name]):
                failures.append("%s lacks %s" % (name, pat))
    if re.search(r"usr/include|cmake/ps", contents["libps0"]):
        failures.append("libps0 holds development files")
    # Dependencies: the libraries each binary links, as Debian packages.
    binaries = {"libps0": os.path.join(a.build, "libps.so"),
                "ps-apps": os.path.join(a.build, "apps", "linear", "ps_linear"),
                "ps-tools": os.path.join(a.build, "ps_sim")}
    for name, binary in binaries.items():
        dep = depends(debs[name])
        for pkg in sorted(owners(binary)):
            if pkg not in dep:
                failures.append("%s does not depend on %s (%s links it)" %
                                (name, pkg, os.path.basename(binary)))
    for name in ["libps-dev", "ps-tools", "ps-apps"]:
        if depends(debs[name]).get("libps0") != "libps0 (= %s)" % a.version:
            failures.append("%s does not depend on libps0 (= %s): %s" %
                            (name, a.version, depends(debs[name]).get("libps0")))
    if "python3" not in depends(debs["ps-tools"]):
        failures.append("ps-tools does not depend on python3")
    # apt resolves them together (and would pull what is missing).
    sim = subprocess.run(["apt-get", "install", "--simulate", "-o", "Debug::NoLocking=1"] +
                         ["./" + os.path.basename(d) for d in debs.values()], cwd=a.work,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if sim.returncode != 0 or not all(re.search(r"^Inst %s " % re.escape(n), sim.stdout, re.M)
                                      for n in want):
        failures.append("apt-get install --simulate failed:\n" + sim.stdout[-2000:])
    # The unpacked tree runs a job: the packaged launcher and app on the packaged library.
    root = os.path.join(a.work, "root")
    for deb in debs.values():
        run(["dpkg-deb", "-x", deb, root])
    stream = os.path.join(a.work, "stream.txt")
    counts = {"alpha": 50, "beta": 30, "gamma": 7}
    with open(stream, "w") as f:
        for i in range(50):
            f.write(" ".join(w for w, n in counts.items() if i < n) + "\n")
    env = dict(os.environ)
    env.pop("PS_VAN", None)
    out = run([sys.executable, os.path.join(root, "usr", "bin", "ps-launch"), "-s", "1", "-w", "1",
               "--timeout", "120", "--", os.path.join(root, "usr", "bin", "ps_countmin"),
               "--input", stream, "--top_k", "3", "--quiet"], env=env)
    top = dict((m.group(1), int(m.group(2)))
               for m in re.finditer(r"TOP \d+ (\S+) (\d+)", out))
    if top != counts:
        failures.append("packaged ps_countmin counted %s, want %s:\n%s" % (top, counts, out[-1500:]))
    if failures:
        print("FAILED deb packages:\n  " + "\n  ".join(failures))
        return 1
    print("PASSED deb packages: %s (%s), dependencies resolved by apt, packaged launcher ran the "
          "packaged app" % (", ".join(sorted(os.path.basename(d) for d in debs.values())), arch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
