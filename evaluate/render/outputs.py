"""compare's files: the figures and ``compare.md``, each written atomically inside the output folder.

Every path is resolved by ``utils/io/output_path.py`` (never outside the folder) and any problem writing one is an
:class:`OutputError` naming the file: ``compare`` says it in one line and exits 2, never 1 (which means "unfair").
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from evaluate.analysis.comparison import Comparison
from evaluate.render.frameworks import platform_figures
from evaluate.render.markdown import markdown
from evaluate.render.plots import comparison_figure, loss_parity_figure, save_figure
from evaluate.render.quality_plot import evaluated, quality_figure
from utils.io.atomic import atomic_write_text
from utils.io.output_path import OutputPathError, output_file
from utils.io.sanitise import safe_markdown
from utils.result.names import mark_output_dir


class OutputError(Exception):
    """An output of the comparison cannot be written; the message names the file and the reason."""


def _written(output_dir: Path, name: str, write: Callable[[Path], Path]) -> Path:
    """``write(output_dir / name)``: the path resolved by ``utils/io/output_path.py`` (never outside ``output_dir``),
    any OSError turned into an :class:`OutputError` that names the file."""
    try:
        target = output_file(output_dir, name)
    except OutputPathError as exc:
        raise OutputError(str(exc)) from None
    try:
        return write(target)
    except OSError as exc:
        raise OutputError(f"cannot write {target}: {exc.strerror or exc}") from None


def write_outputs(comparison: Comparison, output_dir: Path) -> list[Path]:
    """compare.png, loss_parity.png (only when a platform pair is comparable), quality.png (only when a result
    evaluated: evaluate/render/quality_plot.py), compare.md; each atomically."""
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create the output directory {output_dir}: {exc.strerror or exc}") from None
    mark_output_dir(output_dir)  # tprimat's output folder: shell/wrap.sh packs only such folders
    figure = comparison_figure(comparison.by_model, comparison.convergence_band)
    written = [_written(output_dir, comparison.figure_name, lambda path: save_figure(figure, path))]
    parities = comparison.all_parities()
    if comparison.parity_figure_name and any(p.reason is None for p in parities):
        parity = loss_parity_figure(parities)
        written.append(_written(output_dir, comparison.parity_figure_name, lambda path: save_figure(parity, path)))
    if comparison.quality_figure_name and evaluated(comparison.by_model):  # time to quality (issue 34)
        quality = quality_figure(comparison.by_model)
        written.append(_written(output_dir, comparison.quality_figure_name, lambda path: save_figure(quality, path)))
    text = safe_markdown(markdown(comparison))  # utils/io/sanitise.py: nothing a reader's viewer acts on
    written.append(_written(output_dir, "compare.md", lambda path: atomic_write_text(path, text)))
    # The per-platform framework view (evaluate/render/frameworks.py): compare_<platform>_frameworks.png.
    for name, platform_figure in platform_figures(comparison.by_model):
        written.append(_written(output_dir, name, lambda path, shown=platform_figure: save_figure(shown, path)))
    return written
