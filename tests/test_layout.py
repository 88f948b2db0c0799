"""The packages' layout: every import runs down the layer order their docstrings give, and no import goes round in a circle.

Each of ``journal`` and ``runner`` lists its layers bottom-up in its
``__init__`` docstring; a module may import from its own layer and the layers
below it, and the packages import one way: runner -> routines -> journal.
Every import counts, those under ``if TYPE_CHECKING:`` and inside functions
included, since each is a dependency someone reading or moving the code meets.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import journal
import runner

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("journal", "routines", "runner")  # the order imports between them may go: each to those before it
LAYERED = {"journal": journal, "runner": runner}
SCRIPTS = ("bench",)  # directories of scripts that import each other by bare module name


@dataclass(frozen=True, slots=True)
class Import:
    """One import statement's target, as the module and line that import it."""

    source: str
    target: str
    line: int


def module_files(directory: Path, prefix: str) -> dict[str, Path]:
    """Dotted module names (``prefix`` + path) of every .py file under *directory*."""
    modules = {}
    for path in sorted(directory.rglob("*.py")):
        parts = path.relative_to(directory).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join((prefix, *parts)) if prefix else ".".join(parts)] = path
    return modules


def all_modules(root: Path) -> dict[str, Path]:
    """Every module of the three packages and of the script directories (named ``bench.x``)."""
    modules: dict[str, Path] = {}
    for package in PACKAGES:
        modules.update(module_files(root / package, package))
    for scripts in SCRIPTS:
        modules.update({f"{scripts}.{name}": path for name, path in module_files(root / scripts, "").items() if name})
    return modules


def imports(module: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """Every import in *path*'s code (anywhere in it) of a module in *modules*, resolved to that module."""
    scripts = module.split(".")[0] if module.split(".")[0] in SCRIPTS else None
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def known(name: str) -> str | None:
        if scripts and f"{scripts}.{name.split('.')[0]}" in modules:
            return f"{scripts}.{name.split('.')[0]}"  # a script imports its neighbour by bare name
        return name if name in modules else None

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        targets: list[str | None] = []
        if isinstance(node, ast.Import):
            targets = [known(alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                # `from journal.files import store` imports the module journal.files.store; `from journal import Entry`, journal itself
                targets.append(known(f"{base}.{alias.name}") or known(base))
        found += [Import(module, target, node.lineno) for target in targets if target is not None and target != module]
    return found


def layer_order(package: str, docstring: str) -> list[str]:
    """The layer names listed bottom-up under "Layers, bottom-up" in *package*'s docstring."""
    _, found, listing = docstring.partition("Layers, bottom-up")
    assert found, f"the {package} docstring has no 'Layers, bottom-up' list"
    names = []
    for line in listing.split("::", 1)[1].splitlines()[1:]:
        if not line.strip():
            if names:
                break
            continue
        match = re.fullmatch(r"    (\w+): +\S.*", line)
        assert match, f"the {package} docstring's layer list has a line that is no 'name: job': {line!r}"
        names.append(match[1])
    return names


def layer_of(module: str, order: list[str]) -> int | None:
    """The rank of *module*'s layer in *order* (None for the package itself, whose rank its imports give)."""
    parts = module.split(".")
    if len(parts) == 1:
        return None
    if parts[1] == "__main__":
        return len(order) - 1  # ``python -m`` runs the command: the top layer
    assert parts[1] in order, f"{module} is in no layer of the {parts[0]} docstring's list {order}"
    return order.index(parts[1])


def order_problems(root: Path, orders: dict[str, list[str]]) -> list[str]:
    """Every import against the packages' order or against a layer order, as a readable line each."""
    modules = all_modules(root)
    edges = [edge for module, path in modules.items() if module.split(".")[0] in PACKAGES for edge in imports(module, path, modules)]
    ranks: dict[str, int | None] = {module: layer_of(module, orders[module.split(".")[0]])
                                    for module in modules if module.split(".")[0] in orders}
    for package in orders:  # a package's own __init__ sits at the highest layer it re-exports from
        ranks[package] = max((r for e in edges if e.source == package and (r := ranks.get(e.target)) is not None), default=0)
    problems = []
    for edge in edges:
        source, target = edge.source.split(".")[0], edge.target.split(".")[0]
        where = f"{modules[edge.source].relative_to(root)}:{edge.line}"
        if source != target:
            if target not in PACKAGES or PACKAGES.index(target) > PACKAGES.index(source):
                problems.append(f"{where}: {edge.source} imports {edge.target}, against runner -> routines -> journal")
            continue
        if source in orders:
            have, want = ranks[edge.source], ranks[edge.target]
            assert have is not None and want is not None
            if want > have:
                order = orders[source]
                problems.append(f"{where}: {edge.source} ({order[min(have, len(order) - 1)]}) imports {edge.target} "
                                f"({order[min(want, len(order) - 1)]}), a layer above it in the {source} docstring")
    return problems


def cycles(root: Path) -> list[list[str]]:
    """The import circles among all modules: strongly connected components of two or more, each sorted."""
    modules = all_modules(root)
    graph = {module: sorted({e.target for e in imports(module, path, modules)}) for module, path in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for start in graph:  # Tarjan's algorithm, iteratively: a deep chain must not hit the recursion limit
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
            if child < len(graph[node]):
                work.append((node, child + 1))
                nxt = graph[node][child]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return found


def orders() -> dict[str, list[str]]:
    """Each layered package's order, from its docstring."""
    return {name: layer_order(name, package.__doc__ or "") for name, package in LAYERED.items()}


def test_every_layer_is_a_subpackage_or_module() -> None:
    """Each name in a layer list is a subpackage or a top-level module of its package, listed once."""
    for name, order in orders().items():
        assert len(order) == len(set(order)), f"{name}: a layer is listed twice in {order}"
        for layer in order:
            assert (REPO / name / layer / "__init__.py").is_file() or (REPO / name / f"{layer}.py").is_file(), f"{name}.{layer}"


def test_imports_follow_the_layer_order() -> None:
    """No module imports from a layer above its own, or from a package that depends on its own."""
    problems = order_problems(REPO, orders())
    assert not problems, "imports against the order:\n" + "\n".join(problems)


def test_no_import_circles() -> None:
    """No two modules of journal, runner, routines or bench import each other, directly or round a circle."""
    found = cycles(REPO)
    assert not found, "import circles (one line each, its modules):\n" + "\n".join(", ".join(c) for c in found)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the packages' and benchmarks' sources, to plant a wrong import in."""
    for name in (*PACKAGES, *SCRIPTS):
        for path in (REPO / name).rglob("*.py"):
            copy = tmp_path / path.relative_to(REPO)
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_bytes(path.read_bytes())
    return tmp_path


def plant(tree: Path, module: str, line: str) -> None:
    """Append *line* inside a function at the end of *module*'s file, as a local import would be."""
    path = tree / (module.replace(".", "/") + ".py")
    path.write_text(path.read_text(encoding="utf-8") + f"\n\ndef _planted() -> None:\n    {line}\n", encoding="utf-8")


def test_a_local_import_against_the_order_is_found(tree: Path) -> None:
    """An import of an upper layer, even inside a function, is named with its file and line."""
    plant(tree, "journal.files.store", "from journal.ranking.search import Ranking")
    problems = order_problems(tree, orders())
    assert len(problems) == 1
    assert re.fullmatch(r"journal/files/store\.py:\d+: journal\.files\.store \(files\) imports journal\.ranking\.search "
                        r"\(ranking\), a layer above it in the journal docstring", problems[0])


def test_an_import_against_the_package_order_is_found(tree: Path) -> None:
    """The journal importing the runner is against runner -> routines -> journal."""
    plant(tree, "journal.api", "import runner")
    assert [p.split(": ", 1)[1] for p in order_problems(tree, orders())] == ["journal.api imports runner, against runner -> routines -> journal"]


def test_a_type_checking_circle_is_found(tree: Path) -> None:
    """Two modules importing each other make a circle, however one of them imports: here under TYPE_CHECKING."""
    path = tree / "journal" / "files" / "entry.py"
    path.write_text(path.read_text(encoding="utf-8") + "\nif TYPE_CHECKING:\n    from journal.files.store import EntryStore\n", encoding="utf-8")
    assert cycles(tree) == [["journal.files.entry", "journal.files.store"]]


def test_a_script_circle_is_found(tree: Path) -> None:
    """Benchmarks import each other by bare name; a circle among them is found too."""
    plant(tree, "bench.freshness", "import bench_retrieval")
    assert cycles(tree) == [["bench.bench_retrieval", "bench.freshness"]]



def test_the_architecture_page_lists_each_packages_layers_as_its_docstring_does() -> None:
    """docs/architecture.md's table of each package's layers: the same names, in the same order, with the same jobs."""
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    for package in (journal, runner):
        docstring = package.__doc__ or ""
        listing = docstring.partition("Layers, bottom-up")[2].split("::", 1)[1].strip("\n").split("\n\n", 1)[0]
        documented = [match.groups() for match in re.finditer(r"^    (\w+): +(\S.*)$", listing, re.MULTILINE)]
        table = page.split(f"| `{package.__name__}` layer |", 1)[1].split("\n\n", 1)[0]
        listed = re.findall(rf"^\| (\w+) \| `{package.__name__}/\w+(?:/|\.py)` \| (.+) \|$", table, re.MULTILINE)
        assert listed == documented and [name for name, _ in listed] == layer_order(package.__name__, docstring)


# The doors between folders: what another folder may import, and what the runner may take from the journal.

#: What the runner may import of the journal: its face, its errors, the shared frame, and the frame's click kit (kept out of the
#: frame's face so that the face imports no click).
RUNNER_DOORS = ("journal", "journal.errors", "journal.frame", "journal.frame.clikit")


def folder(module: str, modules: dict[str, Path]) -> str:
    """The package *module* sits in: itself for a package's ``__init__``, else its parent."""
    return module if modules[module].name == "__init__.py" else module.rpartition(".")[0]


def door_problems(root: Path) -> list[str]:
    """Every import through a wall: a ``_``-module of another folder, or a journal module the runner may not use."""
    modules = all_modules(root)
    problems = []
    for module, path in modules.items():
        if module.split(".")[0] not in PACKAGES:
            continue
        for edge in imports(module, path, modules):
            where = f"{path.relative_to(root)}:{edge.line}"
            private = edge.target.rpartition(".")[2].startswith("_")
            if private and folder(edge.target, modules) != folder(module, modules):
                problems.append(f"{where}: {module} imports {edge.target}, private to {folder(edge.target, modules)}: import its face instead")
            if module.startswith("runner") and edge.target.startswith("journal") and edge.target not in RUNNER_DOORS:
                problems.append(f"{where}: {module} imports {edge.target}; the runner uses only {', '.join(RUNNER_DOORS)}")
    return problems


def test_imports_go_through_doors() -> None:
    """A ``_``-module is its folder's own; the runner takes from the journal only its face, its errors and the shared frame."""
    problems = door_problems(REPO)
    assert not problems, "imports through a wall:\n" + "\n".join(problems)


def test_a_private_module_imported_from_another_folder_is_found(tree: Path) -> None:
    """Reaching into another folder's ``_``-module, even inside a function, is named with its file and line and the face to use."""
    plant(tree, "journal.ranking.search", "from journal.files._safefs import check_dir")
    assert [p.split(": ", 1)[1] for p in door_problems(tree)] == [
        "journal.ranking.search imports journal.files._safefs, private to journal.files: import its face instead"]


def test_a_runner_import_of_a_journal_internal_is_found(tree: Path) -> None:
    """The runner importing a public journal module that is no door is named too."""
    plant(tree, "runner.run.engine", "from journal.files.entry import Entry")
    assert [p.split(": ", 1)[1] for p in door_problems(tree)] == [
        "runner.run.engine imports journal.files.entry; the runner uses only journal, journal.errors, journal.frame, journal.frame.clikit"]


def test_each_face_exports_what_it_imports() -> None:
    """A subpackage's ``__init__`` names in ``__all__`` every name it takes from its own modules, so a face never hides what it offers."""
    for package in PACKAGES:
        for init in sorted((REPO / package).rglob("__init__.py")):
            tree_ = ast.parse(init.read_text(encoding="utf-8"))
            own = ".".join(init.parent.relative_to(REPO).parts) + "."
            imported = {alias.asname or alias.name for node in tree_.body if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(own)
                        for alias in node.names}
            exported = next((ast.literal_eval(node.value) for node in tree_.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                             and any(isinstance(t, ast.Name) and t.id == "__all__" for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))
                             and node.value is not None), None)
            assert exported is not None, f"{init.relative_to(REPO)} has no __all__"
            assert imported <= set(exported), f"{init.relative_to(REPO)} imports but does not export {sorted(imported - set(exported))}"



# What the commands print on stdout goes through the frame's one echo, which turns a stdout that cannot take it into one line.

ECHO_HOME = "journal.frame.clikit"


def stdout_problems(root: Path) -> list[str]:
    """Every ``click.echo(...)`` without ``err=True``, and every ``print(...)``, in a module of the packages but the frame's click kit."""
    problems = []
    for module, path in all_modules(root).items():
        if module.split(".")[0] not in PACKAGES or module == ECHO_HOME:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            to_stderr = any(k.arg == "err" and isinstance(k.value, ast.Constant) and k.value.value is True for k in node.keywords)
            if (isinstance(func, ast.Attribute) and func.attr == "echo" and isinstance(func.value, ast.Name) and func.value.id == "click"
                    and not to_stderr) or (isinstance(func, ast.Name) and func.id == "print"):
                problems.append(f"{path.relative_to(root)}:{node.lineno}: {module} writes stdout itself; call {ECHO_HOME}.echo")
    return problems


def test_stdout_goes_through_the_one_echo() -> None:
    """No module but the frame's click kit prints to stdout: a full disk or a closed pipe is handled once, for both commands."""
    problems = stdout_problems(REPO)
    assert not problems, "stdout written around the frame's echo:\n" + "\n".join(problems)


def test_stdout_written_around_the_echo_is_found(tree: Path) -> None:
    """A ``click.echo`` to stdout or a ``print``, even inside a function, is named; one to stderr is not."""
    plant(tree, "runner.cli.k8s", "click.echo('done')")
    plant(tree, "journal.cli.cli", "click.echo('loading', err=True)")
    plant(tree, "runner.monitor.status", "print('ok')")
    assert [p.split(": ", 1)[1] for p in stdout_problems(tree)] == [
        "runner.cli.k8s writes stdout itself; call journal.frame.clikit.echo",
        "runner.monitor.status writes stdout itself; call journal.frame.clikit.echo"]


# One owner for the index's tables: SQL runs in journal/indexing/ alone.

SQL_CALLS = ("execute", "executemany", "executescript")
#: A string that is a statement: a query handed to journal.indexing to run is SQL outside it all the same.
SQL_TEXT = re.compile(r"\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|PRAGMA|BEGIN|COMMIT|ROLLBACK|SAVEPOINT|WITH|REPLACE|VACUUM)\b")


def sql_problems(root: Path) -> list[str]:
    """Every call of ``.execute(``, ``.executemany(`` or ``.executescript(``, and every SQL statement written as a string, in a journal
    module outside journal/indexing/."""
    problems = []
    for module, path in module_files(root / "journal", "journal").items():
        if module == "journal.indexing" or module.startswith("journal.indexing."):
            continue
        found = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SQL_CALLS:
                found.append((node.lineno, f"calls .{node.func.attr}("))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL_TEXT.match(node.value):
                found.append((node.lineno, f"writes the statement {node.value.split()[0]}"))
        problems += [f"{path.relative_to(root)}:{line}: {module} {what}; read the index through journal.indexing" for line, what in sorted(found)]
    return problems


def test_only_the_indexing_layer_runs_sql() -> None:
    """No journal module outside journal/indexing/ runs SQL: the index's tables have one owner."""
    problems = sql_problems(REPO)
    assert not problems, "SQL outside journal/indexing/:\n" + "\n".join(problems)


def test_sql_outside_the_indexing_layer_is_found(tree: Path) -> None:
    """A query run from another folder, or written there for journal.indexing to run, even inside a function, is named with its line."""
    plant(tree, "journal.checking.verify", "conn.executescript(script)")
    plant(tree, "journal.carry.export", "snapshot.rows_of('SELECT id FROM entries')")
    plant(tree, "journal.indexing.digest", "conn.execute('SELECT 1')")
    assert [p.split(": ", 1)[1] for p in sql_problems(tree)] == [
        "journal.carry.export writes the statement SELECT; read the index through journal.indexing",
        "journal.checking.verify calls .executescript(; read the index through journal.indexing"]


# IndexKeeper's state is its own: other modules change it only through its methods.

KEEPER_NAMES = ("keeper", "_keeper")  # what the journal's modules call an IndexKeeper they hold


def keeper_write_problems(root: Path) -> list[str]:
    """Every assignment (``=``, ``+=``, annotated) to an attribute of ``keeper``/``self._keeper`` in a journal module but journal/sync/_keeper.py."""
    problems = []
    for module, path in module_files(root / "journal", "journal").items():
        if module == "journal.sync._keeper":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else []
            for target in targets:
                for part in ast.walk(target):
                    if not isinstance(part, ast.Attribute):
                        continue
                    owner = part.value
                    name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else None
                    if name in KEEPER_NAMES and isinstance(part.ctx, ast.Store):
                        problems.append(f"{path.relative_to(root)}:{node.lineno}: {module} sets {name}.{part.attr}; call an IndexKeeper method instead")
    return problems


def test_only_the_keeper_sets_its_state() -> None:
    """No journal module but journal/sync/_keeper.py assigns an attribute of the IndexKeeper it holds."""
    problems = keeper_write_problems(REPO)
    assert not problems, "IndexKeeper state set from outside:\n" + "\n".join(problems)


def test_a_keeper_field_set_from_outside_is_found(tree: Path) -> None:
    """Setting a keeper's field from another module, even inside a function, is named with its file and line."""
    plant(tree, "journal.sync._append", "keeper.skipped = []")
    plant(tree, "journal.sync._keeper", "keeper.depth += 1")
    assert [p.split(": ", 1)[1] for p in keeper_write_problems(tree)] == [
        "journal.sync._append sets keeper.skipped; call an IndexKeeper method instead"]


# serve's handle on a worker process stands on the ground floor's process code, never on a backend.


def reached(root: Path, start: str) -> set[str]:
    """Every module *start* imports, directly or through the modules it imports (local and TYPE_CHECKING imports included)."""
    modules = all_modules(root)
    seen: set[str] = set()
    waiting = [start]
    while waiting:
        module = waiting.pop()
        if module not in seen:
            seen.add(module)
            waiting += [edge.target for edge in imports(module, modules[module], modules)]
    return seen


def backends_reached(root: Path) -> list[str]:
    """The backend modules serve's worker handle (runner.run.worker) imports, however indirectly."""
    return sorted(module for module in reached(root, "runner.run.worker") if module.split(".")[:2] == ["runner", "backends"])


def test_the_worker_imports_no_backend() -> None:
    """Starting, reading and killing a worker needs the process helpers of runner.processes, not a backend's module."""
    assert backends_reached(REPO) == []


def test_a_backend_reached_from_the_worker_is_found(tree: Path) -> None:
    """A backend imported by a module the worker imports, even inside a function, is found."""
    plant(tree, "runner.run.contract", "from runner.backends.command import run_program")
    assert backends_reached(tree) == ["runner.backends.base", "runner.backends.command", "runner.backends.usage"]


# Every lock the code takes is in docs/architecture.md's "Locks and state" section.

#: Thread locks, named in the section as ``Class.attribute``, a module's ``name``, or the function a local one lives in.
THREAD_LOCKS = ("Lock", "RLock", "Condition", "Semaphore", "BoundedSemaphore")


def locks_section() -> str:
    """The "Locks and state" section of docs/architecture.md, up to the next section of its level."""
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    return page.split("\n## Locks and state\n", 1)[1].split("\n## ", 1)[0]


def _called(node: ast.AST) -> str | None:
    """The name a call calls: ``flock`` for ``fcntl.flock(...)``, ``FileLock`` for ``FileLock(...)``."""
    if not isinstance(node, ast.Call):
        return None
    return node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id if isinstance(node.func, ast.Name) else None


def _locks_in(node: ast.AST, where: str, owner: str | None = None, function: str | None = None) -> list[tuple[str, int, str | None]]:
    """The lock sites below *node* of the file *where* (see :func:`lock_sites`), inside class *owner* and function *function*."""
    sites: list[tuple[str, int, str | None]] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.ClassDef):
            sites += _locks_in(child, where, child.name, None)
            continue
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            sites += _locks_in(child, where, owner, function or child.name)
            continue
        called = _called(child)
        if isinstance(child, ast.Assign | ast.AnnAssign) and child.value is not None and _called(child.value) in THREAD_LOCKS:
            target = child.targets[0] if isinstance(child, ast.Assign) else child.target
            if isinstance(target, ast.Attribute) and owner is not None:
                sites.append((where, child.lineno, f"{owner}.{target.attr}"))
            elif isinstance(target, ast.Name) and function is None:
                sites.append((where, child.lineno, target.id))
            else:
                sites.append((where, child.lineno, function or "?"))
        elif called in ("flock", "FileLock") or (called == "lock" and isinstance(child, ast.Call) and child.args):
            if not any(isinstance(arg, ast.Attribute) and arg.attr == "LOCK_UN" for arg in ast.walk(child)):
                sites.append((where, child.lineno, None))
        elif isinstance(child, ast.Constant) and child.value == "BEGIN IMMEDIATE":
            sites.append((where, child.lineno, None))
        sites += _locks_in(child, where, owner, function)
    return sites


def lock_sites(root: Path) -> list[tuple[str, int, str | None]]:
    """(file, line, name) of every lock taken or made in the packages: a thread lock with the name the section gives it; a file lock
    (``flock``, ``filelock``), SQLite's write lock (``BEGIN IMMEDIATE``) or a Redis lock (a client's ``lock``) with None: its file names it."""
    return [site for package in PACKAGES for path in sorted((root / package).rglob("*.py"))
            for site in _locks_in(ast.parse(path.read_text(encoding="utf-8")), str(path.relative_to(root)))]


def undocumented_locks(root: Path, section: str) -> list[str]:
    """Each lock site whose file (and, for a thread lock, whose name) the section does not give in backquotes."""
    return [f"{where}:{line}: " + (f"the thread lock {name}" if name else "a lock") + " is not in docs/architecture.md's Locks and state"
            for where, line, name in lock_sites(root) if f"`{where}`" not in section or (name is not None and f"`{name}`" not in section)]


def test_every_lock_is_in_the_locks_section() -> None:
    """Each lock the code takes (thread locks, flock, filelock, BEGIN IMMEDIATE, the beat's Redis lock) is in the section, by file and name."""
    assert lock_sites(REPO), "no lock found: the search is broken"
    problems = undocumented_locks(REPO, locks_section())
    assert not problems, "\n".join(problems)


def test_an_undocumented_lock_is_found(tree: Path) -> None:
    """A new thread lock in a documented file, and a flock in a file the section never names, are both found."""
    plant(tree, "journal.encoding.semantic", "guard = threading.Lock()")
    plant(tree, "journal.ranking.search", "fcntl.flock(0, fcntl.LOCK_EX)")
    found = [problem.split(": ", 1)[1] for problem in undocumented_locks(tree, locks_section())]
    assert found == ["the thread lock _planted is not in docs/architecture.md's Locks and state",
                     "a lock is not in docs/architecture.md's Locks and state"]


# A journal's files are the journal's to name: runner and routines ask journal's API, never look at its layout.

#: The names a journal directory holds (docs/python-api.md, "On disk").
JOURNAL_NAMES = ("manifest.json", ".write.lock", ".generation", "journal.sqlite3", "weights.json", "entries", "index", "models")


def _names_a_journal_file(node: ast.AST) -> str | None:
    """The journal file *node* names: a path joined with one (``root / "entries"``), or a string that is a path of one."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant) and isinstance(node.right.value, str):
        first = node.right.value.split("/")[0]
        return first if first in JOURNAL_NAMES else None
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and "/" in node.value.strip("/"):
        parts = node.value.split("/")
        return next((part for part in parts if part in JOURNAL_NAMES[:5]), None)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value if node.value in JOURNAL_NAMES[:5] else None
    return None


def layout_problems(root: Path) -> list[str]:
    """Every place in a runner or routines module that names a file or folder of a journal directory."""
    problems: list[str] = []
    for package in ("runner", "routines"):
        for module, path in module_files(root / package, package).items():
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                name = _names_a_journal_file(node)
                if name is not None:
                    problems.append(f"{path.relative_to(root)}:{node.lineno}: {module} names the journal's {name!r}; ask journal's API instead")
    return list(dict.fromkeys(problems))  # a join and the string in it are one place


def test_runner_and_routines_never_name_a_journals_files() -> None:
    """What a journal directory holds is the journal package's to know: the runner asks the journal (still_in_place, load_encoder)."""
    problems = layout_problems(REPO)
    assert not problems, "journal layout known outside journal/:\n" + "\n".join(problems)


def test_a_journal_file_named_in_the_runner_is_found(tree: Path) -> None:
    """A stat of a journal's lock file, a join with its entries/, even inside a function, is named with its file and line."""
    plant(tree, "runner.run.kept", 'os.stat(root / ".write.lock")')
    plant(tree, "runner.fleet.tasks", 'root / "entries" / "2026"')
    plant(tree, "routines.digest", 'open(f"{root}/x", "entries/.generation")')
    assert sorted(p.split(": ", 1)[1] for p in layout_problems(tree)) == [
        "routines.digest names the journal's '.generation'; ask journal's API instead",
        "runner.fleet.tasks names the journal's 'entries'; ask journal's API instead",
        "runner.run.kept names the journal's '.write.lock'; ask journal's API instead"]
