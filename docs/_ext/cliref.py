"""``.. dynnets-cli::`` -- the reference of the ``dynnets`` command, read from its parser.

The page is generated from :func:`dynnets.cli.build_parser` at build time, so
it cannot drift from the command: a new subcommand, option or help text shows
up on the next build. For each subcommand it writes a section with the
description, the usage line, each argument group's options (flags, metavar,
choices, default, help) and the epilog.
"""
import argparse

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles


def _escape(text):
    return text.replace("\\", "\\\\").replace("*", "\\*").replace("`", "\\`").replace("|", "\\|")


def _invocation(action):
    if not action.option_strings:
        return action.metavar or action.dest
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    fmt = argparse.HelpFormatter("dynnets")
    metavar = fmt._format_args(action, action.dest.upper())
    return ", ".join(f"{o} {metavar}" for o in action.option_strings)


def _help(action):
    text = action.help or ""
    if "%(" in text:
        params = dict(vars(action), prog="dynnets")
        if params.get("choices") is not None:
            params["choices"] = ", ".join(map(str, params["choices"]))
        text = text % params
    return text


def _parser_lines(parser, level_char):
    lines = []
    # a fixed width: the page must not depend on the terminal of whoever builds it
    fmt = parser.formatter_class(prog=parser.prog, width=100)
    fmt.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    usage = fmt.format_help().strip()
    if parser.description:
        lines += [_escape(parser.description), ""]
    lines += ["::", "", *("   " + u for u in usage.splitlines()), ""]
    for group in parser._action_groups:
        actions = [a for a in group._group_actions if not isinstance(a, argparse._SubParsersAction)
                   and a.help is not argparse.SUPPRESS]
        if not actions:
            continue
        lines += [f"**{_escape(group.title)}**", ""]
        for a in actions:
            lines += [f"``{_invocation(a)}``"]
            body = _help(a) or "(no help text)"
            if a.choices is not None and "{" not in _invocation(a):
                body += f" Choices: {', '.join(map(str, a.choices))}."
            lines += ["   " + _escape(body), ""]
    if parser.epilog:
        lines += [_escape(parser.epilog), ""]
    return lines


class DynnetsCli(SphinxDirective):
    has_content = False

    def run(self):
        from dynnets.cli import build_parser
        top = build_parser()
        lines = _parser_lines(top, "-")
        sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
        helps = {c.dest: c.help for c in sub._choices_actions}
        for name, parser in sub.choices.items():
            title = f"dynnets {name}"
            lines += [title, "-" * len(title), "", f"*{_escape(helps.get(name, ''))}*", ""]
            lines += _parser_lines(parser, "~")
        node = nodes.section()
        node.document = self.state.document
        nested_parse_with_titles(self.state, StringList(lines, source="dynnets.cli.build_parser"), node)
        return node.children


def setup(app):
    app.add_directive("dynnets-cli", DynnetsCli)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
