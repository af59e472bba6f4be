"""``tf.app``: TF1's program entry point, ``tf.app.run()``, and ``tf.app.flags``
(the same module as ``tf.flags``: :mod:`dynnets.static.flags`)."""
from __future__ import annotations

import difflib
import sys

from . import flags
from .flags import FLAGS, FlagsError

__all__ = ["run", "flags"]

_HELP = ("--help", "-help", "--helpshort", "-helpshort", "--helpfull", "-helpfull", "-h", "-?")


def run(main=None, argv=None, flag_values=None):
    """Parse the command line into the flags, then ``sys.exit(main(argv))``, as TF1's ``tf.app.run``.

    Parameters
    ----------
    main : callable, optional
        Called with ``[program] +`` the arguments that are not flags; default
        the ``main`` function of the ``__main__`` module.
    argv : list of str, optional
        The command line, program first; default ``sys.argv``.
    flag_values : FlagValues, optional
        Default :data:`~dynnets.static.flags.FLAGS`.

    ``--help`` (``-h``, ``--helpfull``...) prints every flag with its help and
    default and exits with status 0. A bad value or a required flag left unset
    prints ``FATAL Flags parsing error: ...`` naming the flag and exits with
    status 1, as absl's ``app.run`` does. An unknown flag is passed on to
    ``main`` in its ``argv``, as TF1's ``tf.app.run`` does (it parses with
    ``known_only=True``, so wrappers can hand ``main`` flags of their own);
    unlike TF1, a one-line warning on stderr names it and the defined flags it
    resembles, so a misspelt flag is not silently ignored.
    """
    fv = FLAGS if flag_values is None else flag_values
    argv = list(sys.argv if argv is None else argv)
    if main is None:
        main = getattr(sys.modules.get("__main__"), "main", None)
        if main is None:
            raise TypeError("app.run: no main given and the __main__ module defines no main()")
    args = argv[1:argv.index("--")] if "--" in argv else argv[1:]
    if any(a in _HELP for a in args):
        sys.stdout.write(fv.help_text(argv[0] if argv else None))
        sys.exit(0)
    try:
        remaining = fv(argv, known_only=True)
        for name in fv.unknown_flags(remaining[1:]):
            close = difflib.get_close_matches(name, list(fv), n=3)
            hint = f" (did you mean: {', '.join(close)}?)" if close else ""
            sys.stderr.write(f"WARNING: app.run: unknown command line flag '{name}' passed on to main{hint}\n")
        fv.validate_required()
    except FlagsError as e:
        sys.stderr.write(f"FATAL Flags parsing error: {e}\nPass --help to see help on flags.\n")
        sys.exit(1)
    sys.exit(main(remaining))
