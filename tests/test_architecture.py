"""docs/architecture.md names every module of the package (it is the newcomer's map)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_module_is_in_the_architecture_doc() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    package = ROOT / "conductor_cli"
    modules = sorted(str(p.relative_to(package)) for p in package.rglob("*.py"))
    assert len(modules) > 50
    missing = [m for m in modules if f"`{m}`" not in doc]
    assert not missing, f"docs/architecture.md lacks: {missing}"


def test_the_readme_links_to_the_map_inside_the_repo() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/architecture.md" in readme
    assert "../shared" not in readme
