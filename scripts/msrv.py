#!/usr/bin/env python3
"""Check that the workspace's rust-version is true: no locked dependency
that the host build uses (normal, build or dev) asks for a newer compiler.

Toolchains cannot be installed on every machine that runs the tests, so this
reads what the dependencies declare (`rust_version` in `cargo metadata`)
instead of building with the old compiler; clippy's `incompatible_msrv` lint
covers our own code. Exits 1 with the offenders listed.
"""
import json
import subprocess
import sys


def version(text):
    """'1.88' or '1.88.0' as a comparable tuple (missing parts are 0)."""
    parts = [int(p) for p in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def main():
    host = next(
        line.split(": ", 1)[1]
        for line in subprocess.run(
            ["rustc", "-vV"], capture_output=True, text=True, check=True
        ).stdout.splitlines()
        if line.startswith("host: ")
    )
    # Only what this platform builds: dependencies behind other targets or
    # behind `cfg(loom)` (the model checker, run with the current compiler)
    # do not count.
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--locked",
             "--filter-platform", host],
            capture_output=True, text=True, check=True,
        ).stdout
    )
    members = set(meta["workspace_members"])
    ours = [p for p in meta["packages"] if p["id"] in members]
    declared = {p["name"]: p.get("rust_version") for p in ours}
    missing = [n for n, v in declared.items() if not v]
    if missing:
        print(f"msrv: no rust-version in {', '.join(sorted(missing))}", file=sys.stderr)
        return 1
    msrv = min(version(v) for v in declared.values())
    newer = sorted(
        (version(p["rust_version"]), p["name"], p["version"])
        for p in meta["packages"]
        if p["id"] not in members and p.get("rust_version")
        and version(p["rust_version"]) > msrv
    )
    shown = ".".join(map(str, msrv))
    if newer:
        print(f"msrv: rust-version is {shown}, but these locked dependencies need more:",
              file=sys.stderr)
        for v, name, ver in newer:
            print(f"  {name} {ver} needs {'.'.join(map(str, v))}", file=sys.stderr)
        return 1
    highest = max(
        (version(p["rust_version"]) for p in meta["packages"]
         if p["id"] not in members and p.get("rust_version")),
        default=(0, 0, 0),
    )
    print(f"msrv: rust-version {shown}; the locked dependencies need at most "
          f"{'.'.join(map(str, highest))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
