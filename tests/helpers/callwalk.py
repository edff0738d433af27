"""Where a job's context goes: an ``ast`` listing of the functions a named parameter is handed to (issue 32).

The counting rule (``tests/house/test_launch_walk.py`` holds the launcher to it):

* Start at one function and one of its parameters, the *context* (``ctx`` of
  ``train.launch.launcher.launch``).
* An expression *carries* the context when it is the context itself, not a part read off it: a
  tracked name; ``replace(<context>, ...)``; an object of a class of this repo built with the context
  (a *holder*: ``JobResult(ctx)``), or ``self`` in that class's methods; the holder's attribute that was
  given the context (``self.ctx``). ``ctx.cfg``, ``ctx.log_path`` or what a call returns when given the
  context (a plan, a result) are other values. A ``lambda``'s body is code of its caller.
* In the body, in source order, every call an argument of which carries the context, or a method of a
  holder, is a *place*, when ``ast`` can name its callee in this repo: a function or class of the module,
  one imported from ``utils``, ``data``, ``train``, ``evaluate`` or ``bench`` (a re-export followed to its
  definition), ``module.function``, a method of a class built, entered or annotated in the body
  (``x = ResultFile(...)``, ``with Signals() as x``, ``plugin: Plugin``: the contract's method stands for
  the framework's), of ``self`` or of ``self.<attribute>`` built in ``__init__``. What ``ast`` cannot
  name (a plugin module chosen at run time) is no place. A class stands for its own ``__init__``; one
  without (a dataclass, a pydantic model, an exception) runs no code of this repo and is no place.
* The walk goes into each place the first time it is reached: its tracked names are the parameters the
  context was bound to (``self`` for a holder's method) and the local names bound to a value that
  carries it. A function defined in a body (a closure) that reads the body's tracked names is walked
  with them.
* The *trail* is every call of a place in the order reached, a place already walked included (the
  reader goes back to it) and not walked again. *Places* = the distinct functions of the trail. A
  module is *revisited* each time the trail enters it again after leaving it: its revisits = its runs
  of consecutive places - 1; *climbs back* = all modules' revisits together. A *stop* is one such run
  (the trail's stops = its places with consecutive ones of a module counted once); a module's *visits*
  are its stops.
* ``derived`` (issue 47's count): every value read off the context or computed from it carries it too
  (``ctx.cfg``, ``ctx.data.prefix``, ``plan = plugin.plan(ctx)``, a name bound to any expression that reads
  one), so a call given any of them is a place; a place in ``utils/`` or ``data/`` is a stop the walk does
  not go into (those layers take plain values and are held by their own tests).

``python -m tests.helpers.callwalk train.launch.launcher launch ctx`` prints the trail and the figures.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from tests.helpers.paths import REPO

# With ``derived``, the lower layers are stops the walk does not go into: they take plain values, not the job.
LOWER_LAYERS = ("utils.", "data.")
PACKAGES = ("utils", "data", "train", "evaluate", "bench")

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Place:
    """One function of the walk: its module and its name in it (``Class.method``, ``outer.inner``)."""

    module: str
    name: str

    def __str__(self) -> str:
        return f"{self.module}.{self.name}"


@dataclass
class Module:
    """One parsed module: its functions and classes by qualified name, and what its names import."""

    name: str
    functions: dict[str, FunctionNode] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    imports: dict[str, str] = field(default_factory=dict)  # local name -> "module" or "module.attr"


def _path_of(module: str, root: Path) -> Path | None:
    base = root.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _imports(tree: ast.AST, module: str, is_package: bool) -> dict[str, str]:
    found: dict[str, str] = {}
    for node in ast.walk(tree):  # function-local imports too: a lazy import still names the callee
        if isinstance(node, ast.Import):
            for alias in node.names:
                found[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else \
                    alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(node, module, is_package)
            for alias in node.names:
                found[alias.asname or alias.name] = f"{source}.{alias.name}"
    return found


@cache
def load(module: str, root: Path = REPO) -> Module | None:
    """The module parsed, or None when it is not one of this repo's files."""
    if not module.startswith(PACKAGES):
        return None
    path = _path_of(module, root)
    if path is None:
        return None
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    parsed = Module(module, imports=_imports(tree, module, path.name == "__init__.py"))

    def collect(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                parsed.functions[prefix + node.name] = node
                collect(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, ast.ClassDef):
                parsed.classes[prefix + node.name] = node
                collect(node.body, f"{prefix}{node.name}.")

    collect(tree.body, "")
    return parsed


def resolve_symbol(dotted: str, root: Path = REPO, depth: int = 0) -> Place | None:
    """``module.attr`` (``module.Class.method``) to the place that defines it, re-exports followed."""
    if depth > 5 or "." not in dotted:
        return None
    parts = dotted.split(".")
    for split in range(len(parts) - 1, 0, -1):
        module = load(".".join(parts[:split]), root)
        if module is None:
            continue
        name = ".".join(parts[split:])
        if name in module.functions or name in module.classes:
            return Place(module.name, name)
        head, _, rest = name.partition(".")
        if head in module.imports:  # a re-export
            return resolve_symbol(".".join([module.imports[head], *([rest] if rest else [])]), root, depth + 1)
        return None
    return None


def _names_in(node: ast.AST) -> set[str]:
    """The names an expression reads, a lambda's body left out."""
    found: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, ast.Lambda):
            continue
        if isinstance(current, ast.Name):
            found.add(current.id)
        stack.extend(ast.iter_child_nodes(current))
    return found


def _own_nodes(function: FunctionNode) -> list[ast.AST]:
    """The nodes of ``function``'s body, the bodies of functions and classes defined in it left out."""
    found: list[ast.AST] = []
    stack: list[ast.AST] = list(reversed(function.body))
    while stack:
        node = stack.pop()
        found.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
    return found


def _class_of(expression: ast.expr | None, module: Module) -> str | None:
    """The dotted class an annotation or constructor call names, through the module's imports."""
    if expression is None:
        return None
    if isinstance(expression, ast.Constant) and isinstance(expression.value, str):  # a string annotation
        try:
            expression = ast.parse(expression.value, mode="eval").body
        except SyntaxError:
            return None
    if isinstance(expression, ast.Call):
        expression = expression.func
    if isinstance(expression, ast.BinOp):  # ``X | None``
        return _class_of(expression.left, module) or _class_of(expression.right, module)
    if isinstance(expression, ast.Name):
        if expression.id in module.classes:
            return f"{module.name}.{expression.id}"
        return module.imports.get(expression.id)
    return None


def _classes_in(function: FunctionNode, module: Module, owner: str | None, root: Path) -> dict[str, str]:
    """Receiver -> dotted class: the names built, entered or annotated with a class in ``function``;
    ``self`` and ``self.<attribute>`` built or annotated in the owner class's ``__init__``."""
    found: dict[str, str] = {}

    def note(name: str, dotted: str | None) -> None:
        if dotted and resolve_symbol(dotted, root) is not None:
            found[name] = dotted

    arguments = function.args
    for argument in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
        note(argument.arg, _class_of(argument.annotation, module))
    if owner:
        found["self"] = f"{module.name}.{owner}"
        init = module.functions.get(f"{owner}.__init__")
        for node in _own_nodes(init) if init else []:
            target = node.target if isinstance(node, ast.AnnAssign) else \
                node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                value = node.value if isinstance(node, ast.Assign) else None
                annotation = node.annotation if isinstance(node, ast.AnnAssign) else None
                note(f"self.{target.attr}", _class_of(value if isinstance(value, ast.Call) else annotation, module))
    for node in _own_nodes(function):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    note(target.id, _class_of(node.value, module))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            note(node.target.id, _class_of(node.annotation, module))
        elif isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name):
            note(node.optional_vars.id, _class_of(node.context_expr, module))
    return found


def _receiver_key(node: ast.expr) -> str | None:
    """``x`` or ``self.x``: the receivers whose class a body can name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return f"self.{node.attr}"
    return None


def _callee(call: ast.Call, module: Module, scope: str, classes: dict[str, str], root: Path) -> Place | None:
    func = call.func
    if isinstance(func, ast.Name):
        for candidate in (f"{scope}.{func.id}", func.id):  # a closure, then the module's own
            if candidate in module.functions or candidate in module.classes:
                return Place(module.name, candidate)
        if func.id in module.imports:
            return resolve_symbol(module.imports[func.id], root)
        return None
    if isinstance(func, ast.Attribute):
        key = _receiver_key(func.value)
        if key in classes:
            return resolve_symbol(f"{classes[key]}.{func.attr}", root)
        if isinstance(func.value, ast.Name) and func.value.id in module.imports:
            return resolve_symbol(f"{module.imports[func.value.id]}.{func.attr}", root)
    return None


def _definition(place: Place, root: Path) -> tuple[FunctionNode | None, bool]:
    """(the function a place runs, whether its first parameter is the instance); a class runs its __init__."""
    module = load(place.module, root)
    assert module is not None
    if place.name in module.classes:
        return module.functions.get(f"{place.name}.__init__"), True
    function = module.functions[place.name]
    owner = place.name.rsplit(".", 1)[0] if "." in place.name else None
    is_method = owner in module.classes and not any(
        isinstance(d, ast.Name) and d.id == "staticmethod" for d in function.decorator_list)
    return function, is_method


@dataclass
class Scope:
    """What one function's walk knows: its module, the names that carry the context, the holders' attributes."""

    module: Module
    tracked: set[str]
    holder_attributes: set[str]  # in a holder's method: the attributes of ``self`` that were given the context
    root: Path
    derived: bool = False  # every value read off the context or computed from it carries it too

    def is_class(self, call: ast.Call) -> bool:
        """Whether ``call`` builds an object of a class of this repo."""
        dotted = _class_of(call.func, self.module) if isinstance(call.func, ast.Name) else None
        place = resolve_symbol(dotted, self.root) if dotted else None
        return place is not None and place.name in (load(place.module, self.root) or self.module).classes

    def carries(self, node: ast.AST) -> bool:
        """Whether ``node`` is the context (see the module's rule), not a part read off it; with ``derived``,
        whether it reads the context or a value derived from it anywhere (``ctx.cfg.sl``, ``f(ctx)``)."""
        if self.derived:
            return bool(_names_in(node) & self.tracked)
        if isinstance(node, ast.Name):
            return node.id in self.tracked
        if isinstance(node, ast.Attribute):
            return (isinstance(node.value, ast.Name) and node.value.id == "self" and "self" in self.tracked
                    and node.attr in self.holder_attributes)
        if isinstance(node, ast.Starred):
            return self.carries(node.value)
        if isinstance(node, (ast.Tuple, ast.List)):
            return any(self.carries(item) for item in node.elts)
        if isinstance(node, ast.IfExp):
            return self.carries(node.body) or self.carries(node.orelse)
        if isinstance(node, ast.Call) and node.args:
            replaced = isinstance(node.func, ast.Name) and self.module.imports.get(node.func.id) == \
                "dataclasses.replace"
            if replaced or self.is_class(node):
                return any(self.carries(argument) for argument in [*node.args, *(k.value for k in node.keywords)])
        return False


def _bind(call: ast.Call, function: FunctionNode | None, skip_first: bool, scope: Scope) -> set[str]:
    """The callee's parameters that receive the context (``self`` for a method of a holder)."""
    if function is None:
        return set()
    arguments = function.args
    every = [a.arg for a in [*arguments.posonlyargs, *arguments.args]]
    positional = every[1 if skip_first else 0:]
    names = {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]}
    bound: set[str] = set()
    if skip_first and every and isinstance(call.func, ast.Attribute) and scope.carries(call.func.value):
        bound.add(every[0])
    for index, argument in enumerate(call.args):
        if not scope.carries(argument):
            continue
        if isinstance(argument, ast.Starred) or index >= len(positional):
            if arguments.vararg:
                bound.add(arguments.vararg.arg)
            continue
        bound.add(positional[index])
    for keyword in call.keywords:
        if scope.carries(keyword.value):
            if keyword.arg in names:
                bound.add(keyword.arg)
            elif arguments.kwarg:
                bound.add(arguments.kwarg.arg)
    return bound


def _bindings(function: FunctionNode) -> list[tuple[set[str], ast.expr]]:
    """(names, the value they are bound to) for each assignment, ``with ... as`` and walrus of the body."""
    found: list[tuple[set[str], ast.expr]] = []

    def names(node: ast.AST) -> set[str]:
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}

    for node in _own_nodes(function):
        if isinstance(node, ast.Assign):
            found.append(({name for target in node.targets for name in names(target)}, node.value))
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            found.append((names(node.target), node.value))
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            found.append((names(node.optional_vars), node.context_expr))
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            found.append((names(node.target), node.iter))
    return found


def _holder_attributes(place: Place, tracked: set[str], root: Path) -> set[str]:
    """For a class's ``__init__`` given the context (``tracked``): the attributes of ``self`` that keep it."""
    module = load(place.module, root)
    assert module is not None
    owner = place.name if place.name in module.classes else place.name.rsplit(".", 1)[0]
    init = module.functions.get(f"{owner}.__init__")
    if init is None or not tracked:
        return set()
    found = set()
    for node in _own_nodes(init):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in tracked:
            found |= {t.attr for t in node.targets if isinstance(t, ast.Attribute)}
    return found


def walk(module: str, function: str, parameter: str, root: Path = REPO, doors: bool = False,
         derived: bool = False) -> list[Place]:
    """The trail of ``parameter`` of ``module.function``: each call of a place, in the order reached.

    ``doors``: also list, without walking into them, the calls given only a part of the context (``ctx.cfg``)
    from the places walked: where the job hands a piece of itself to another room. ``derived``: follow every
    value derived from the context as the context itself (``ctx.cfg``, ``plan = plugin.plan(ctx)``, what a
    call given either returns): the count of issue 47.
    """
    trail: list[Place] = []
    walked: set[Place] = set()
    holders: dict[str, set[str]] = {}  # "module.Class" -> its attributes that keep the context

    def visit(place: Place, tracked: set[str]) -> None:
        trail.append(place)
        if place in walked or (derived and place.module.startswith(LOWER_LAYERS)):
            return
        walked.add(place)
        node, is_method = _definition(place, root)
        parsed = load(place.module, root)
        assert parsed is not None
        owner = (place.name if place.name in parsed.classes else place.name.rsplit(".", 1)[0]) if is_method \
            else None
        if owner and ("self" in tracked or place.name in parsed.classes):
            holders.setdefault(f"{place.module}.{owner}", set()).update(
                _holder_attributes(place, tracked - {"self"}, root))
            tracked = tracked | {"self"}
        if node is None:
            return
        scope = Scope(parsed, set(tracked), holders.get(f"{place.module}.{owner}", set()), root, derived)
        bindings = _bindings(node)
        changed = True
        while changed:  # local names bound to the context, to a fixed point
            changed = False
            for names, value in bindings:
                if not names <= scope.tracked and scope.carries(value):
                    scope.tracked |= names
                    changed = True
        classes = _classes_in(node, parsed, owner, root)
        calls = sorted((n for n in _own_nodes(node) if isinstance(n, ast.Call)),
                       key=lambda n: (n.lineno, n.col_offset))
        for call in calls:
            callee = _callee(call, parsed, place.name, classes, root)
            if callee is None:
                continue
            target, skip_first = _definition(callee, root)
            bound = _bind(call, target, skip_first, scope)
            callee_module = load(callee.module, root)
            if target is None and callee_module is not None and callee.name in callee_module.classes:
                # a class without an __init__ of its own runs none of the repo's code: no place, but a
                # dataclass given the context holds it in the fields it was given
                fields = [node.target.id for node in callee_module.classes[callee.name].body
                          if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)]
                pairs = zip(fields, call.args, strict=False)  # fields with defaults may be left out
                given = {*(name for name, argument in pairs if scope.carries(argument)),
                         *(k.arg for k in call.keywords if k.arg in fields and scope.carries(k.value))}
                if given:
                    holders.setdefault(str(callee), set()).update(given)
                continue
            closure = callee.module == place.module and callee.name.startswith(place.name + ".")
            if closure and not bound and target is not None:  # a function of this body reads its names
                bound = {n.id for n in ast.walk(target) if isinstance(n, ast.Name)} & scope.tracked
            if bound:
                visit(callee, bound)
            elif doors and target is not None and any(
                    _names_in(part) & scope.tracked for part in [*call.args, *(k.value for k in call.keywords)]):
                trail.append(callee)

    visit(Place(module, function), {parameter})
    return trail


def places(trail: list[Place]) -> list[Place]:
    """The distinct places of a trail, in the order first reached."""
    return list(dict.fromkeys(trail))


def revisits(trail: list[Place]) -> Counter[str]:
    """Module -> how many times the trail enters it again after leaving it."""
    runs: Counter[str] = Counter()
    previous = None
    for place in trail:
        if place.module != previous:
            runs[place.module] += 1
        previous = place.module
    return Counter({module: count - 1 for module, count in runs.items()})


def stops(trail: list[Place]) -> list[str]:
    """The trail's stops: its runs of consecutive places in one module, each named by its module."""
    return [place.module for index, place in enumerate(trail) if index == 0 or trail[index - 1].module != place.module]


def visits(trail: list[Place]) -> Counter[str]:
    """Module -> its stops on the trail (1 + its revisits)."""
    return Counter(stops(trail))


def report(trail: list[Place]) -> str:
    """The trail, one call a line (a place already walked marked ``again``), and the figures."""
    again = revisits(trail)
    seen: set[Place] = set()
    lines = []
    for place in trail:
        lines.append(f"  {'again ' if place in seen else ''}{place}")
        seen.add(place)
    distinct = places(trail)
    worst = again.most_common(1)[0] if again else ("-", 0)
    lines += ["", f"places: {len(distinct)} in {len({p.module for p in distinct})} modules; "
              f"stops: {len(stops(trail))}; "
              f"climbs back: {sum(again.values())}; most revisited: {worst[0]} ({worst[1]})"]
    lines += [f"  {module}: {count}" for module, count in again.most_common() if count]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.helpers.callwalk", description=__doc__.split("\n\n")[0])
    parser.add_argument("module", help="dotted module, e.g. train.launch.launcher")
    parser.add_argument("function", help="function in it, e.g. launch (Class.method for a method)")
    parser.add_argument("parameter", help="the parameter to follow, e.g. ctx")
    parser.add_argument("--doors", action="store_true",
                        help="also list the calls given only a part of the context (not walked into)")
    parser.add_argument("--derived", action="store_true",
                        help="follow every value derived from the context too (issue 47's count)")
    parser.add_argument("--root", type=Path, default=REPO, help="the checkout to read (default: this one)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    parsed = load(args.module, root)
    if parsed is None or args.function not in parsed.functions:
        print(f"callwalk: no function {args.function} in {args.module}", file=sys.stderr)
        return 2
    print(report(walk(args.module, args.function, args.parameter, root, doors=args.doors, derived=args.derived)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
