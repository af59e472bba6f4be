"""``tf.app``: TF1's program entry point, ``tf.app.run()``, and ``tf.app.flags``
(the same module as ``tf.flags``: :mod:`dynnets.static.flags`)."""
from __future__ import annotations

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
    default and exits with status 0. An unknown flag, a bad value or a
    required flag left unset prints ``FATAL Flags parsing error: ...`` naming
    the flag and exits with status 1, as absl's ``app.run`` does (TF1's
    ``run`` passes unknown flags on to ``main`` instead: see
    :mod:`dynnets.static.flags`).
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
        remaining = fv(argv)
    except FlagsError as e:
        sys.stderr.write(f"FATAL Flags parsing error: {e}\nPass --help to see help on flags.\n")
        sys.exit(1)
    sys.exit(main(remaining))
