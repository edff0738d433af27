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

Issue 47 counts more: the context *and every value derived from it* (``ctx.cfg``, ``ctx.data``, a plan, a
name bound to anything read off them), its *stops* being the trail's runs of places in one module, calls into
``utils/`` and ``data/`` counted as stops but not walked into (``--derived``). Before issue 47: 131 stops,
``train/settings/samples.py`` entered 13 times and ``utils/dataset/paths.py`` 10 (the sample digest re-derived
the job's files from the config at every turn). The issue asks for at most 45 stops and 3 visits a module. At its
freeze of train/ (one ``JobData`` value resolved in the run context): 107 stops, ``train/launch/job_result.py``
entered 9 times, ``train/logs/scan.py`` 8. Then: the start checks in one call (``check_start``), the preflight in
one pass with the plugin that planned the job, the digest as one plan and one keep (``digest_plan``,
``keep_digests``), the energy window from the log's iteration lines only (``iteration_times``), the result file's
life in ``utils/files/result_file.py``: 41 stops, no module entered more than 3 times.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.callwalk import Place, places, revisits, stops, visits, walk

MAX_PLACES = 35
MAX_REVISITS = 3
# The derived walk: issue 47's bounds (41 stops today).
MAX_STOPS = 45
MAX_VISITS = 3


def test_the_launch_walk_is_short_and_does_not_climb_back() -> None:
    trail = walk("train.launch.launcher", "launch", "ctx")
    distinct = places(trail)
    assert len(distinct) <= MAX_PLACES, "\n".join(map(str, distinct))
    again = {module: count for module, count in revisits(trail).items() if count > MAX_REVISITS}
    assert again == {}, f"modules the job's context enters again more than {MAX_REVISITS} times: {again}"


def test_the_context_and_its_derived_values_take_no_longer_a_walk() -> None:
    trail = walk("train.launch.launcher", "launch", "ctx", derived=True)
    assert len(stops(trail)) <= MAX_STOPS, "\n".join(stops(trail))
    crowded = {module: count for module, count in visits(trail).items() if count > MAX_VISITS}
    assert crowded == {}, f"modules the job's context and its values enter more than {MAX_VISITS} times: {crowded}"
    assert visits(trail).get("utils.dataset.paths", 0) <= 1  # the job's files are named once, in the run context


def test_a_derived_value_is_followed_but_not_into_a_lower_layer(tmp_path: Path) -> None:
    """``ctx.cfg`` and what a call given it returns carry the context; utils/ is a stop, not walked into."""
    for package in ("train", "utils"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "utils" / "low.py").write_text("def leaf(cfg):\n    return helper(cfg)\n\n"
                                               "def helper(cfg):\n    return cfg\n")
    (tmp_path / "train" / "d.py").write_text(
        "from utils.low import leaf\n\n"
        "def entry(ctx):\n    plan = make(ctx.cfg)\n    leaf(plan)\n    last(plan.argv)\n    other(3)\n\n"
        "def make(cfg):\n    return cfg\n\n"
        "def last(argv):\n    return argv\n\n"
        "def other(n):\n    return n\n")
    trail = walk("train.d", "entry", "ctx", root=tmp_path, derived=True)
    assert [str(place) for place in trail] == ["train.d.entry", "train.d.make", "utils.low.leaf", "train.d.last"]
    assert stops(trail) == ["train.d", "utils.low", "train.d"] and visits(trail)["train.d"] == 2
    assert walk("train.d", "entry", "ctx", root=tmp_path) == [Place("train.d", "entry")]


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
