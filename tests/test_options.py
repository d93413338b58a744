"""smoke.options: every option is one entry of the table, from which the command line, docs/options.md and
the child's arguments come."""

from __future__ import annotations

from tests.helpers import REPO


def test_every_option_of_the_table_is_in_help_and_in_docs_options_md():
    from smoke import cli, options

    shown = cli.parser("cpu_x86_64").format_help()
    page = (REPO / "docs" / "options.md").read_text()
    flags = [opt.flag for opt in options.ROW_OPTIONS if opt.flag]
    assert len(flags) == len(options.ROW_OPTIONS) - 1  # all but the wheel itself
    for flag in flags:
        assert flag in shown, flag
        assert f"`{flag}" in page, flag
    # the page's table is the one the options table makes, word for word
    assert options.markdown() in page


def test_the_childs_arguments_come_from_the_same_table():
    from smoke import options

    given = options.Options(fail_fast=True, overlap=False, parallel_exports="yes")
    words = options.child_arguments(given)
    assert words == ["--fail-fast", "--no-overlap", "--parallel-exports", "yes"]
    parsed = options.child_parser(__import__("argparse").ArgumentParser()).parse_args(words)
    assert (parsed.fail_fast, parsed.overlap, parsed.parallel_exports) == (True, False, "yes")
    assert options.child_arguments(options.Options()) == []  # the defaults pass nothing


def test_the_options_type_has_one_field_per_entry_with_the_entry_s_default():
    """Options is a real type (mypy reads its fields); the table makes the command line: the two must agree."""
    import dataclasses

    from smoke import options

    fields = {field.name: field.default for field in dataclasses.fields(options.Options)}
    assert fields == {opt.dest: opt.default for opt in options.ROW_OPTIONS}
