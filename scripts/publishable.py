#!/usr/bin/env python3
"""Check, without the network, that every crate of the workspace could be
packaged for crates.io in dependency order (`cargo package --workspace`):

- every dependency on a workspace crate has a `version` (cargo strips the
  `path` when packaging; a dev-dependency without one is dropped instead);
- a published crate (no `publish = false`) depends only on published crates;
- a published crate has a description, licence, readme, rust-version,
  keywords (at most 5, each at most 20 characters) and categories, and ships
  the licence files its SPDX expression names.

`cargo package --workspace` itself needs the registry index; this is the
part that can be checked offline in CI. Exits 1 with every problem listed.
"""
import json
import os
import subprocess
import sys

LICENSE_FILES = {"MIT": "LICENSE-MIT", "Apache-2.0": "LICENSE-APACHE"}


def problems_of(package, published_names, workspace_names):
    name = package["name"]
    published = package["publish"] != []
    found = []
    for dep in package["dependencies"]:
        if dep["name"] not in workspace_names or dep.get("path") is None:
            continue
        kind = dep["kind"] or "normal"
        if dep["req"] == "*":
            if kind != "dev":
                found.append(f"{name}: {kind} dependency `{dep['name']}` has a path but no version")
            continue
        if published and dep["name"] not in published_names:
            found.append(f"{name}: published, but its {kind} dependency `{dep['name']}` has publish = false")
    if not published:
        return found
    for field in ("description", "license", "readme", "rust_version"):
        if not package.get(field):
            found.append(f"{name}: `{field.replace('_', '-')}` is missing")
    if not package["categories"]:
        found.append(f"{name}: `categories` is missing")
    keywords = package["keywords"]
    if not keywords:
        found.append(f"{name}: `keywords` is missing")
    if len(keywords) > 5 or any(len(k) > 20 for k in keywords):
        found.append(f"{name}: crates.io takes at most 5 keywords of at most 20 characters: {keywords}")
    crate_dir = os.path.dirname(package["manifest_path"])
    for spdx, file in LICENSE_FILES.items():
        if spdx in (package.get("license") or "") and not os.path.exists(os.path.join(crate_dir, file)):
            found.append(f"{name}: licence {spdx} but no {file} in {crate_dir}")
    return found


def main():
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
            capture_output=True, text=True, check=True,
        ).stdout
    )
    packages = meta["packages"]
    workspace_names = {p["name"] for p in packages}
    published_names = {p["name"] for p in packages if p["publish"] != []}
    problems = [
        line
        for p in sorted(packages, key=lambda p: p["name"])
        for line in problems_of(p, published_names, workspace_names)
    ]
    for line in problems:
        print(line, file=sys.stderr)
    if problems:
        print(f"{len(problems)} packaging problem(s)", file=sys.stderr)
        return 1
    print(f"publishable: {len(published_names)} of {len(packages)} crates "
          f"({', '.join(sorted(published_names))}); the rest have publish = false")
    return 0


if __name__ == "__main__":
    sys.exit(main())
