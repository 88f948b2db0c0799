"""A fake host tree for the tests of what a unit's sandbox hides (``runner.deploy.systemd._reach``), and this machine's pyenv Python."""

from __future__ import annotations

from pathlib import Path

from runner.deploy.systemd._reach import Step, startup_chain, startup_warnings

__all__ = ["Host", "pyenv_python"]

class Host:
    """A fake host tree under *base*, with the sandbox's hidden directories of its own."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.hidden = ((str(base / "home"), "ProtectHome=yes"), (str(base / "tmp"), "PrivateTmp=yes"))
        self.unit_path = f"{base}/usr/local/bin:{base}/usr/bin"

    def path(self, relative: str) -> Path:
        return self.base / relative

    def executable(self, relative: str, content: bytes) -> str:
        path = self.path(relative)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        path.chmod(0o755)
        return str(path)

    def binary(self, relative: str) -> str:
        """An executable that is not a script (an ELF header is enough: nothing here runs it)."""
        return self.executable(relative, b"\x7fELF\x02\x01\x01\x00")

    def script(self, relative: str, shebang: str) -> str:
        return self.executable(relative, f"#!{shebang}\nimport sys\nfrom runner.cli.cli import main\nsys.exit(main())\n".encode())

    def link(self, relative: str, target: str) -> str:
        path = self.path(relative)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(target)
        return str(path)

    def venv(self, relative: str, home: str) -> None:
        self.path(relative).mkdir(parents=True, exist_ok=True)
        self.path(f"{relative}/pyvenv.cfg").write_text(f"home = {home}\ninclude-system-site-packages = false\nversion = 3.11.7\n")

    def warnings(self, *argv: str, known: tuple[str, ...] = ()) -> list[str]:
        return startup_warnings("the --exec program", argv, known=known, hidden=self.hidden, unit_path=self.unit_path)

    def chain(self, *argv: str) -> list[Step]:
        return startup_chain(argv, unit_path=self.unit_path)


def pyenv_python(host: Host) -> str:
    """A Python installed under the fake home, as pyenv lays it out: python3 -> python3.11, the binary."""
    host.binary("home/dev/.pyenv/versions/3.11.7/bin/python3.11")
    return host.link("home/dev/.pyenv/versions/3.11.7/bin/python3", "python3.11")
