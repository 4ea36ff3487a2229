#!/usr/bin/env python3
"""apps.help (issue 20, item 3): `--help` of every bundled app lists the app's own flags first
and nothing of glog's (those stay under --helpfull), and exits 0; `ps_sim --help` prints its
options and exits 0 (it failed with "--help: missing value")."""
import re
import subprocess
import sys


def main():
    failures = []
    for exe in sys.argv[1:]:
        name = exe.rsplit("/", 1)[-1]
        r = subprocess.run([exe, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=30)
        out = r.stdout
        if r.returncode != 0:
            failures.append("%s --help exited %d: %s" % (name, r.returncode, out[-500:]))
            continue
        if name == "ps_sim":
            if "--policy" not in out or "--seed" not in out:
                failures.append("ps_sim --help does not list its options:\n" + out)
            continue
        flags = re.findall(r"^    -(\w+) ", out, re.M)
        if not out.splitlines()[2].startswith(name + " flags:") or len(flags) < 5:
            failures.append("%s --help does not start with its own flags:\n%s" % (name, out[:800]))
        glog = {"logtostderr", "alsologtostderr", "v", "vmodule", "log_dir"}
        if glog & set(flags):
            failures.append("%s --help lists glog's flags: %s" % (name, sorted(glog & set(flags))))
        if "--helpfull" not in out:
            failures.append("%s --help does not say where the other flags are" % name)
    if failures:
        print("FAILED apps.help:\n  " + "\n  ".join(failures))
        return 1
    print("apps.help: %d programs list their own flags first" % (len(sys.argv) - 1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
