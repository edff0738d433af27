"""A job's context from the launcher's entry visits at most 35 places, and no module more than 3 times again.

Counted by ``tests/helpers/callwalk.py`` (an ``ast`` walk, no import of the code) from
``train.launch.launcher.launch`` and its parameter ``ctx``:

* a *place* is a function of this repo that a call hands the context to, the context itself and not a
  part of it (``ctx``, ``replace(ctx, ...)``, an object built with it such as ``JobResult(ctx)``, ``self``
  in that object's methods, ``self.ctx``; not ``ctx.cfg``, not a plan or a result a call returned), and
  that ``ast`` can name: a function or class of the module or imported from it, a method of a class the
  body builds or annotates (``plugin: Plugin`` names the contract's method); a class without an
  ``__init__`` of its own (a dataclass, a model) is no place;
* the walk goes into each place once, following the parameters that received the context and the local
  names bound to it, calls in source order, depth first;
* the *trail* lists every call of a place in that order, a place already walked included;
  *places* = the distinct functions of the trail; a module is *revisited* each time the trail enters it
  again after it left it (its runs of consecutive places - 1).

``python -m tests.helpers.callwalk train.launch.launcher launch ctx`` prints the trail and the figures;
``--doors`` adds the calls that get only a part of the context (``check_dataset(ctx.cfg, ...)``).
Before issue 32's launch pipeline: 19 places in 5 modules, 18 climbs back, ``train/launch/launcher.py``
revisited 8 times (the preflight, found by ``getattr``, was not on the trail at all).
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.callwalk import Place, places, revisits, walk

MAX_PLACES = 35
MAX_REVISITS = 3


def test_the_launch_walk_is_short_and_does_not_climb_back() -> None:
    trail = walk("train.launch.launcher", "launch", "ctx")
    distinct = places(trail)
    assert len(distinct) <= MAX_PLACES, "\n".join(map(str, distinct))
    again = {module: count for module, count in revisits(trail).items() if count > MAX_REVISITS}
    assert again == {}, f"modules the job's context enters again more than {MAX_REVISITS} times: {again}"


def test_every_step_of_a_jobs_life_is_on_the_walk() -> None:
    """The walk sees what docs/ARCHITECTURE.md's "A job's life" names: checks, plan, run, collect, one result."""
    names = {str(place) for place in places(walk("train.launch.launcher", "launch", "ctx"))}
    assert {"train.launch.launcher.check_job", "train.launch.contract.Plugin.plan",
            "train.launch.checks.check_memory", "train.launch.preflight.before_launch",
            "train.launch.launcher._run", "train.launch.contract.Plugin.collect",
            "train.launch.job_result.JobResult.emit"} <= names


def test_the_counting_rule(tmp_path: Path) -> None:
    """A part of the context is no place; a holder's method is; a call back into a module is a revisit."""
    package = tmp_path / "train"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text(
        "from train.b import Holder, helper\n\n"
        "def entry(ctx):\n    first(ctx)\n    helper(ctx.cfg)\n    job = Holder(ctx)\n    job.run()\n"
        "    second(ctx)\n\n"
        "def first(ctx):\n    return ctx\n\n"
        "def second(ctx):\n    return ctx\n")
    (package / "b.py").write_text(
        "class Holder:\n    def __init__(self, ctx):\n        self.ctx = ctx\n\n"
        "    def run(self):\n        from train.a import second\n        second(self.ctx)\n\n"
        "def helper(cfg):\n    return cfg\n")
    trail = walk("train.a", "entry", "ctx", root=tmp_path)
    a, b = "train.a", "train.b"
    assert trail == [Place(a, "entry"), Place(a, "first"), Place(b, "Holder"), Place(b, "Holder.run"),
                     Place(a, "second"), Place(a, "second")]
    assert len(places(trail)) == 5
    assert revisits(trail) == {a: 1, b: 0}
    assert Place(b, "helper") in walk("train.a", "entry", "ctx", root=tmp_path, doors=True)


def test_a_dataclass_that_holds_the_context_is_followed(tmp_path: Path) -> None:
    """Building a dataclass runs no code of the repo (no place), but its methods read the context it was given."""
    package = tmp_path / "train"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "c.py").write_text(
        "from dataclasses import dataclass\n\n"
        "@dataclass\nclass Box:\n    ctx: object\n    size: int = 0\n\n"
        "    def use(self):\n        return leaf(self.ctx)\n\n"
        "def leaf(ctx):\n    return ctx\n\n"
        "def entry(ctx):\n    box = Box(ctx)\n    return box.use()\n")
    trail = walk("train.c", "entry", "ctx", root=tmp_path)
    assert [place.name for place in trail] == ["entry", "Box.use", "leaf"]
