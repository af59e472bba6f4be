"""``.. figure-commands:: page [page ...]`` -- every command behind a figure, gathered.

For each listed page (Markdown, relative to the docs folder) and each of its
sections, the directive lists the ``bash`` blocks of that section, under the
section's title with a link to it. The list is read from the pages at build
time, so a command changed beside its figure is changed here too.
"""
import re
from pathlib import Path

from docutils import nodes
from sphinx.util.docutils import SphinxDirective


def _slug(title):
    # MyST's heading anchors (myst_heading_anchors): lower case, words joined by '-'
    s = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return s.replace(" ", "-")


def sections_with_commands(text):
    """``[(title, [command block, ...])]`` of a Markdown page, in order."""
    out, title, fence, block = [], None, None, []
    for line in text.splitlines():
        if fence is None:
            m = re.match(r"^(#{1,4}) (.*)", line)
            if m:
                title = m.group(2)
                out.append((title, []))
            elif line.startswith("```"):
                fence = line[3:].strip()
                block = []
        elif line.startswith("```"):
            if fence == "bash" and out:
                out[-1][1].append("\n".join(block))
            fence = None
        else:
            block.append(line)
    return [(t, cmds) for t, cmds in out if cmds]


class FigureCommands(SphinxDirective):
    required_arguments = 1
    final_argument_whitespace = True

    def run(self):
        result = []
        for page in self.arguments[0].split():
            path = Path(self.env.srcdir) / page
            self.env.note_dependency(str(path))
            docname = page.rsplit(".", 1)[0]
            for title, cmds in sections_with_commands(path.read_text()):
                para = nodes.paragraph()
                ref = nodes.reference("", "", internal=True,
                                      refuri=self.env.app.builder.get_relative_uri(self.env.docname, docname)
                                      + "#" + _slug(title))
                ref += nodes.Text(title.replace("`", ""))
                para += nodes.strong("", "", ref)
                result.append(para)
                for c in cmds:
                    result.append(nodes.literal_block(c, c, language="bash"))
        return result


def setup(app):
    app.add_directive("figure-commands", FigureCommands)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
