"""HelpScreen: the keys and panels, from help.md beside this file."""
from __future__ import annotations

from importlib import resources

from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown


def help_text() -> str:
    """The help page's Markdown."""
    return resources.files("kvtrace.tui").joinpath("help.md").read_text()


class HelpScreen(ModalScreen):
    """A dismissable page of keys."""

    BINDINGS = [Binding("escape,q,question_mark", "app.pop_screen", "Close")]

    def compose(self):
        with VerticalScroll(id="help"):
            yield Markdown(help_text())
