"""A web console for the people who curate a library: review, approve, roll out, watch.

`s3skills console --tokens FILE` serves one library (a user's, or `--shared NAME`) in a
browser: its skills and their problems, a skill's SKILL.md, files, versions and diffs, the
channels against latest, the approvals queue, the audit and the usage. Readers look;
curators also enable, disable, approve, set a channel's version and promote, through the
CLI's own commands (`ConsoleSource`), recorded as themselves. See docs/CONSOLE.md.

Needs the `console` extra (`pip install "s3skills[console]"`).
"""

from s3skills.console.app import create_app
from s3skills.console.auth import Identity, Sessions, TokenRoles
from s3skills.console.source import ConsoleError, ConsoleSource

__all__ = ["ConsoleError", "ConsoleSource", "Identity", "Sessions", "TokenRoles", "create_app"]
