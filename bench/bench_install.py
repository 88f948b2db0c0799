"""What `pip install '.[nn]'` adds: size on disk and packages, in a fresh virtual environment.

Installs the project bare, measures the environment's packages, installs the
`nn` extra on top and measures again; prints each distribution the extra
brought with its size, and fails if torch, sentence-transformers or any CUDA
package came along. Uses pip's own configuration (index, mirrors).

    python bench/bench_install.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = ("torch", "sentence-transformers", "nvidia-", "cuda-", "triton")

# Run inside the new environment: every distribution with the bytes of its recorded files.
SIZES = """
import importlib.metadata as metadata, json, os
sizes = {}
for dist in metadata.distributions():
    total = 0
    for file in dist.files or []:
        try:
            total += os.path.getsize(file.locate())
        except OSError:
            pass
    sizes[dist.metadata["Name"].lower()] = total
print(json.dumps(sizes))
"""


def _sizes(python: Path) -> dict[str, int]:
    out = subprocess.run([str(python), "-c", SIZES], capture_output=True, text=True, check=True).stdout
    sizes: dict[str, int] = json.loads(out)
    return sizes


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        env = Path(scratch) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
        python = env / "bin" / "python"
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*pip, str(ROOT)], check=True)
        bare = _sizes(python)
        subprocess.run([*pip, f"{ROOT}[nn]"], check=True)
        with_nn = _sizes(python)
    added = {name: size for name, size in with_nn.items() if name not in bare}
    print(f"{'distribution added by .[nn]':32} {'MB':>7}")
    for name, size in sorted(added.items(), key=lambda item: -item[1]):
        print(f"{name:32} {size / 1e6:7.1f}")
    print(f"{'total':32} {sum(added.values()) / 1e6:7.1f}  ({len(added)} distributions; the bare install is {sum(bare.values()) / 1e6:.1f} MB with pip)")
    heavy = sorted(name for name in with_nn if name.startswith(FORBIDDEN))
    print("torch, sentence-transformers or CUDA packages installed:", ", ".join(heavy) or "none")
    if heavy:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
