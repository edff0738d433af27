"""utils/config/cli.py: a CLI's bad configuration is one ``config error:`` line and exit 2, said once."""

from __future__ import annotations

import pytest

from utils.config.cli import EXIT_CONFIG, exits_on_config_error
from utils.config.rules import ConfigError


def test_a_config_error_is_one_line_and_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    @exits_on_config_error()
    def main(argv: list[str] | None = None) -> int:
        raise ConfigError("MODEL_SIZE='huge': allowed values are full, tiny")

    assert main([]) == EXIT_CONFIG == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "config error: MODEL_SIZE='huge': allowed values are full, tiny\n"


def test_the_prog_prefix_and_the_other_exits_pass_through(capsys: pytest.CaptureFixture[str]) -> None:
    @exits_on_config_error("data.clean")
    def main(code: int, bad: bool = False) -> int:
        if bad:
            raise ConfigError("SEED='x': expected a whole number")
        return code

    assert main(1) == 1 and main.__name__ == "main"
    assert main(0, bad=True) == 2
    assert capsys.readouterr().err == "data.clean: config error: SEED='x': expected a whole number\n"


def test_other_errors_are_not_its_business() -> None:
    @exits_on_config_error()
    def main() -> int:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        main()
