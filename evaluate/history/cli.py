"""``python -m evaluate.history``: add results to the history database and ask it what changed.

Commands: ``add`` (files, folders, ``output.zip``), ``list`` (filtered runs), ``trend`` (tokens/s/GPU, MFU,
tokens/kWh over time, version changes marked; table and PNG), ``diff A B`` (what differs, beside the metric
deltas), ``tag`` (name runs, e.g. a CI's accepted baseline), ``migrate`` (check and upgrade the schema).
The database is ``--db`` (a path or a URL), else ``HISTORY_DB`` from config.env. Exit 0 on success; ``add``
exits 1 when some inputs were refused (the others are added); 2 on bad input or an unusable database, with
one line and nothing written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from evaluate.history.ingest import add_paths, tag_runs
from evaluate.history.query import MAX_ID, Filters, count_runs, list_runs, render_diff, resolve
from evaluate.history.store import SCHEMA_VERSION, Database, open_database, safe_output
from evaluate.history.target import HistoryError, configured_db, resolve_target
from evaluate.history.trend import render_table, trend_series, write_png
from utils.config.cli import exits_on_config_error, number_argument
from utils.config.load import load_config
from utils.io.sanitise import MESSAGE_CHARS, one_line
from utils.spec.registry import framework_names, model_names, platform_names

TREND_PNG = "history_trend.png"
# The command line's numbers, bounded before they reach the database (argparse types: one line, exit 2).
MAX_LOCK_WAIT = 86_400.0
lock_seconds = number_argument(float, "a number of seconds", lambda value: 0 <= value <= MAX_LOCK_WAIT,
                               f"{{text}} is not between 0 and {MAX_LOCK_WAIT:g} seconds")
run_count = number_argument(int, "a whole number", lambda value: 1 <= value <= MAX_ID,
                            f"{{text}} is not between 1 and {MAX_ID}")


def db_value(args: argparse.Namespace) -> str:
    return args.db if args.db is not None else configured_db()


def _open(args: argparse.Namespace, create: bool = False) -> Database:
    return open_database(db_value(args), create=create, lock_timeout=args.lock_timeout)


def _filters(args: argparse.Namespace) -> Filters:
    return Filters(platform=args.platform, framework=args.framework, model=args.model, profile=args.profile,
                   status=args.status, since=args.since, until=args.until, device=args.device, tag=args.tag,
                   library=args.library)


def cmd_add(args: argparse.Namespace) -> int:
    target = resolve_target(db_value(args))
    if target is None:
        print("history: HISTORY_DB=off; nothing added")
        return 0
    with open_database(target, create=True, lock_timeout=args.lock_timeout) as db:
        added, refused = add_paths(db, args.paths, args.tag)
    for line in refused:
        print(f"history: refused {line}", file=sys.stderr)
    print(f"history: {added.added} run(s) added, {added.present} already in {db.shown}"
          + (f", {len(refused)} input(s) refused" if refused else "")
          + (f"; run id(s) {', '.join(map(str, added.run_ids[:20]))}" if added.run_ids and not args.quiet else ""))
    return 1 if refused else 0


def cmd_list(args: argparse.Namespace) -> int:
    with _open(args) as db, db.read() as conn:
        views = list_runs(conn, _filters(args), limit=args.limit)
    if args.json:
        print(json.dumps([{k: v for k, v in view.run.items() if k != "versions"} | {"versions": view.versions}
                          for view in views], indent=1))
        return 0
    if not views:
        print("no runs match")
        return 0
    print(f"{'run':>7} {'time (UTC)':<19} {'status':<10} {'job':<26} {'device':<28} {'tokens/s/GPU':>13} "
          f"{'MFU %':>6}  versions")
    for view in views:
        r = view.run
        profile = "" if r["profile"] == "identical" else f" ({r['profile']})"
        job = f"{r['platform']}/{r['framework']}/{r['model_label']}{profile}"
        tps = "-" if r["tokens_per_second_per_gpu"] is None else f"{r['tokens_per_second_per_gpu']:,.1f}"
        mfu = "-" if r["mfu"] is None else f"{100 * r['mfu']:.1f}"
        versions = view.versions
        shown = ", ".join(f"{k}={versions[k]}" for k in ("torch", "cuda", "rocm", "driver") if k in versions)
        print(f"{'#' + str(r['id']):>7} {r['run_time'][:19].replace('T', ' '):<19} {r['status']:<10} "
              f"{one_line(job, 26):<26} {one_line(r['device_name'] or '-', 28):<28} {tps:>13} {mfu:>6}  "
              f"{one_line(shown, 80)}")
    print(f"{len(views)} run(s)")
    return 0


def cmd_trend(args: argparse.Namespace) -> int:
    with _open(args) as db, db.read() as conn:
        series = trend_series(conn, _filters(args))
    print(render_table(series, args.last))
    if args.png != "none":
        png = Path(args.png) if args.png else load_config().output_dir / TREND_PNG
        written = write_png(series, png)
        print(f"trend figure: {written}" if written else "trend figure: not written (no ok run measured any figure)")
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    with _open(args) as db, db.read() as conn:
        a, b = resolve(conn, args.a), resolve(conn, args.b)
    print(render_diff(a, b, args.a, args.b))
    return 0


def cmd_tag(args: argparse.Namespace) -> int:
    with _open(args) as db:
        with db.read() as conn:
            views = resolve(conn, args.selector)
        new = tag_runs(db, [v.id for v in views if v.id is not None], args.tags)
    print(f"history: {new} tag(s) added to {len(views)} run(s)")
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    with _open(args, create=args.create) as db, db.read() as conn:
        print(f"history database {db.shown}: schema version {SCHEMA_VERSION}, {count_runs(conn)} run(s)")
    return 0


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", help="the database: a file path, sqlite:///PATH, postgresql://USER@HOST[:PORT]/DB, "
                                     "or off (default: HISTORY_DB from config.env; empty there: "
                                     "history/tprimat-history.sqlite in the repository)")
    common.add_argument("--lock-timeout", type=lock_seconds, default=30.0, metavar="S",
                        help="seconds to wait for another writer's lock before giving up (default 30)")
    return common


def _filter_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--platform", choices=platform_names())
    parser.add_argument("--framework", choices=framework_names())
    parser.add_argument("--model", choices=model_names())
    parser.add_argument("--profile", choices=("identical", "tuned", "mlperf"))
    parser.add_argument("--status", choices=("ok", "incomplete", "failed", "refused"))
    parser.add_argument("--since", metavar="DATE", help="runs at or after this ISO date/time (UTC)")
    parser.add_argument("--until", metavar="DATE", help="runs at or before this ISO date/time (UTC)")
    parser.add_argument("--device", help="a part of the device name, any case (e.g. MI300X, H100)")
    parser.add_argument("--tag", help="runs with this tag")
    parser.add_argument("--library", metavar="NAME[=VERSION]",
                        help="runs that recorded this library/framework version (VERSION may hold * and ?), "
                             "e.g. torch=2.7.*, transformer_engine, megatron_core=0.12.0, driver=570.*")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m evaluate.history", description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    common = _common()
    p_add = sub.add_parser("add", parents=[common], help="add result files, output folders or output.zip archives")
    p_add.add_argument("paths", type=Path, nargs="+", help="train_*.json files, folders holding them, output.zip")
    p_add.add_argument("--tag", action="append", default=[], help="tag the added runs (repeatable)")
    p_add.add_argument("--quiet", action="store_true", help="one summary line, no run ids")
    p_add.set_defaults(func=cmd_add)
    p_list = sub.add_parser("list", parents=[common], help="list stored runs, filtered")
    _filter_args(p_list)
    p_list.add_argument("--limit", type=run_count, help="only the newest N runs")
    p_list.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p_list.set_defaults(func=cmd_list)
    p_trend = sub.add_parser("trend", parents=[common], help="tokens/s/GPU, MFU, tokens/kWh over time; table + PNG")
    _filter_args(p_trend)
    p_trend.add_argument("--png", help=f"where the figure goes (default: OUTPUT_DIR/{TREND_PNG}; none: no figure)")
    p_trend.add_argument("--last", type=run_count, default=20,
                         help="table rows per series (default 20; the PNG has all)")
    p_trend.set_defaults(func=cmd_trend)
    p_diff = sub.add_parser("diff", parents=[common], help="what differs between two runs or groups, with deltas")
    p_diff.add_argument("a", help="A: a run id (42), ids (42,43,44) or a tag (tag:NAME)")
    p_diff.add_argument("b", help="B: the same forms")
    p_diff.set_defaults(func=cmd_diff)
    p_tag = sub.add_parser("tag", parents=[common], help="tag stored runs (e.g. an accepted CI baseline)")
    p_tag.add_argument("selector", help="run ids (42 or 42,43) or tag:NAME")
    p_tag.add_argument("tags", nargs="+", help="tag names")
    p_tag.set_defaults(func=cmd_tag)
    p_migrate = sub.add_parser("migrate", parents=[common], help="check the schema and upgrade an older one")
    p_migrate.add_argument("--create", action="store_true", help="create the database when it does not exist")
    p_migrate.set_defaults(func=cmd_migrate)
    return parser


@exits_on_config_error()
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    safe_output()
    try:
        return args.func(args)
    except HistoryError as exc:
        print(f"history: {one_line(exc, MESSAGE_CHARS)}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"history: {one_line(exc.filename or '')}: {exc.strerror or exc}", file=sys.stderr)
        return 2
