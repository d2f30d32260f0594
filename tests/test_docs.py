"""The front door: the docs site builds with no warnings, README stays short with links that resolve, and README's
tour and the getting-started page run as written, from a fresh copy of the repository and from an empty folder with
a plain `pip install` (no ../shared)."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, require_module

README = ROOT / "README.md"
DOCS = ROOT / "docs"
GETTING_STARTED = DOCS / "getting-started.md"


def blocks(page: Path, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", page.read_text(), flags=re.S)


def test_the_docs_build_with_no_warnings(tmp_path: Path) -> None:
    require_module("mkdocs", "make test installs the docs tools")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "WARNING" not in done.stderr, done.stderr[-3000:]
    page = html.unescape(re.sub(r"<[^>]+>", "", (tmp_path / "site" / "api" / "index.html").read_text()))
    api = " ".join(page.split())
    assert "shockwave.api.simulate(trace, policy='shockwave'" in api  # the signature and docstring, from the code
    assert "Simulate policy (a name, an alias, or file.py:Class) on trace." in api


def test_every_docs_page_is_in_the_site() -> None:
    """mkdocs warns about pages left out of the nav (validation.omitted_files); this names them at once."""
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert {page for page in pages if page not in nav} == set()


def test_readme_is_short_and_its_links_resolve() -> None:
    text = README.read_text()
    assert len(text.encode()) < 12_000
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert links, "README links to the docs"
    assert [link for link in links if not link.startswith("http") and not (ROOT / link).exists()] == []


def test_readme_s_tour_names_only_what_exists() -> None:
    """Cheap before the slow run below: every command is `shockwave` (or the venv's activation) and every
    subcommand exists."""
    (tour,) = (block for block in blocks(README, "bash") if "shockwave " in block)
    import typer

    from shockwave.cli import app

    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    for line in tour.strip().splitlines():
        assert line.startswith(("shockwave ", ". .venv/bin/activate")), line
        if line.startswith("shockwave "):
            assert line.split()[1] in commands, line


def copy_of_the_repository(folder: Path) -> Path:
    """What a fresh clone holds: the tracked files and the untracked ones git does not ignore."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name)
    return folder


def bash(script: str, cwd: Path, env: dict[str, str]) -> None:
    done = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"{script}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"


@pytest.mark.slow
def test_readme_and_getting_started_run_as_written(tmp_path: Path) -> None:
    clone = copy_of_the_repository(tmp_path / "shockwave")
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),  # the page installs into ~/shockwave-env
        "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip")),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "MPLBACKEND": "Agg",
        "LANG": "C.UTF-8",
    }
    install, *_ = blocks(README, "bash")
    assert install.split("\n")[0].startswith("make demo")
    bash("make demo", clone, env)  # README's first command, on the fresh copy
    (tour,) = (block for block in blocks(README, "bash") if "shockwave " in block)
    bash(tour, clone, env)
    assert (clone / "results" / "cmp" / "results.json").exists()

    page_install, *commands = blocks(GETTING_STARTED, "bash")
    empty = tmp_path / "empty"
    empty.mkdir()
    python = "\n".join(f"python - <<'PYTHON'\n{code}PYTHON" for code in blocks(GETTING_STARTED, "python"))
    script = f"{page_install}\ncd {empty}\n" + "\n".join(commands) + "\n" + python
    bash(script, tmp_path, env)  # `pip install ./shockwave` from the folder that holds the copy
    assert (empty / "results" / "cmp" / "figures").is_dir()
    assert not (empty / ".." / "shared").exists()


def test_the_http_api_page_is_the_schema_the_service_serves() -> None:
    """docs/http-api.md's routes table and docs/openapi.json are generated from the app (`make docs-tables`)."""
    checked = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "http_api_doc.py"), "--check"], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
