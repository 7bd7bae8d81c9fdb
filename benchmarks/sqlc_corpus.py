"""Builds a corpus of real applications' sqlc cases for benchmarks/sql_differential.py, outside
the repository: from git directories of public applications (the search tool's `fetch` brings
them to /work/.mirror/<owner>+<name>/repo), every sqlc config with a `postgresql` package is
extracted, with the schema and query paths it names and nothing else, to DEST/<owner>+<name>/
(the repository's own layout, so the config's relative paths still hold).

    .venv/bin/python benchmarks/sqlc_corpus.py DEST GIT_DIR [GIT_DIR ...]
    make differential CASES=DEST

Third-party SQL: never commit DEST; only the figures go into benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import io
import json
import posixpath
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

CONFIGS = ("sqlc.json", "sqlc.yaml", "sqlc.yml")
GLOB = set("*?[")


def git(git_dir: Path, *args: str) -> bytes:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True).stdout


def load(text: str, name: str) -> dict[str, Any]:
    if name.endswith(".json"):
        data = json.loads(text)
    else:
        import yaml  # type: ignore[import-untyped]  # benchmarks/requirements-differential.txt

        data = yaml.safe_load(text)
    return data if isinstance(data, dict) else {}


def packages(data: dict[str, Any]) -> list[dict[str, Any]]:
    found = data.get("packages") if "packages" in data else data.get("sql")
    return [p for p in found if isinstance(p, dict)] if isinstance(found, list) else []


def _items(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else [value] if isinstance(value, str) else []


def referenced(config: str, data: dict[str, Any]) -> list[str]:
    """The repository paths a config's postgresql packages read (a glob's fixed prefix)."""
    base = posixpath.dirname(config)
    out = []
    for package in packages(data):
        if str(package.get("engine", "postgresql")) != "postgresql":
            continue
        for item in _items(package.get("schema")) + _items(package.get("queries")):
            parts = []
            for part in item.split("/"):
                if GLOB & set(part):
                    break
                parts.append(part)
            path = posixpath.normpath(posixpath.join(base, *parts)) if parts else base or "."
            if not path.startswith(".."):
                out.append(path)
    return out


def extract(git_dir: Path, dest: Path) -> int:
    """Extracts one repository's postgresql sqlc packages; returns how many configs it had."""
    named = git_dir.parent if git_dir.name == ".git" else git_dir
    app = named.parent.name if named.name == "repo" else named.name
    files = git(git_dir, "ls-tree", "-r", "--name-only", "HEAD").decode().splitlines()
    configs = [f for f in files if posixpath.basename(f) in CONFIGS and "/testdata/" not in f]
    wanted: set[str] = set()
    used = 0
    for config in configs:
        try:
            data = load(git(git_dir, "show", f"HEAD:{config}").decode(errors="replace"), config)
        except Exception:  # an unreadable config: not a case
            continue
        paths = referenced(config, data)
        if paths:
            used += 1
            wanted.add(config)
            wanted.update(paths)
    present = [p for p in sorted(wanted) if any(f == p or f.startswith(p.rstrip("/") + "/") for f in files)]
    if not used or not present:
        return 0
    archive = git(git_dir, "archive", "--format=tar", "HEAD", "--", *present)
    target = dest / app
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        members = [m for m in tar.getmembers() if m.isdir() or (m.isfile() and m.size < 4 << 20)]
        tar.extractall(target, members=members, filter="data")
    return used


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dest", type=Path)
    parser.add_argument("git_dirs", type=Path, nargs="+")
    args = parser.parse_args(argv)
    for git_dir in args.git_dirs:
        try:
            n = extract(git_dir, args.dest)
        except subprocess.CalledProcessError as err:
            print(f"{git_dir}: {err.stderr.decode(errors='replace').strip()}", file=sys.stderr)
            continue
        print(f"{git_dir}: {n} postgresql sqlc config(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
