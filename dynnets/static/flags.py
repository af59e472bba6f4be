"""``tf.flags`` / ``tf.app.flags``: TF1's command-line flags, a thin shim over argparse.

::

    import dynnets.static as tf
    tf.flags.DEFINE_integer("batch_size", 64, "Batch size")
    tf.flags.DEFINE_boolean("shuffle", True, "Shuffle the data")
    FLAGS = tf.flags.FLAGS

    def main(argv):
        print(FLAGS.batch_size, FLAGS.shuffle)

    if __name__ == "__main__":
        tf.app.run()

Flags are defined with ``DEFINE_string``, ``DEFINE_integer``,
``DEFINE_float``, ``DEFINE_boolean`` (``DEFINE_bool``), ``DEFINE_list``
(comma-separated) and ``DEFINE_enum`` into :data:`FLAGS` (or the
``flag_values=`` given). The command line is read as absl's (which TF1 uses):
``--name=value`` or ``--name value`` (one dash works too), booleans as
``--name``, ``--noname`` or ``--name=true|false|1|0``, and ``--`` ends the flags.

When the command line is parsed:

* ``tf.app.run()`` (:func:`dynnets.static.app.run`) parses ``sys.argv``
  strictly: an unknown flag stops the program with an error naming it (and
  the defined flag it most resembles), a bad value with an error naming the
  flag; ``--help`` prints every flag with its help and default and exits.
  TF1 instead passes unknown flags on to ``main``'s ``argv``; refusing them
  means a mistyped flag is never silently ignored.
* Reading a flag (``FLAGS.batch_size``) before anything parsed reads
  ``sys.argv`` once, ignoring what it does not know (as TF1's wrapper does:
  under a notebook or a test runner, ``sys.argv`` holds their own flags).

``FLAGS`` is process-wide state by its nature (TF1's too): tests build their
own :class:`FlagValues` and pass it as ``flag_values=``.
"""
from __future__ import annotations

import sys

__all__ = ["FLAGS", "FlagValues", "Flag", "FlagsError", "UnrecognizedFlagError", "IllegalFlagValueError",
           "DuplicateFlagError", "DEFINE_string", "DEFINE_integer", "DEFINE_float", "DEFINE_boolean", "DEFINE_bool",
           "DEFINE_list", "DEFINE_enum", "mark_flag_as_required"]


class FlagsError(ValueError):
    """A flag that cannot be defined, or a command line that cannot be parsed."""


class UnrecognizedFlagError(FlagsError):
    """The command line names a flag nobody defined."""


class IllegalFlagValueError(FlagsError):
    """A flag's value does not parse, or is out of its bounds or choices."""


class DuplicateFlagError(FlagsError):
    """The same flag name is defined twice."""


_TRUE = ("true", "t", "1", "yes", "y")
_FALSE = ("false", "f", "0", "no", "n")


class Flag:
    """One flag: ``name``, ``default``, ``help``, its current ``value`` and
    ``present`` (whether the command line set it)."""

    def __init__(self, kind, name, default, help, parse, **extra):  # noqa: A002  (TF1's argument name)
        self.kind = kind
        self.name = name
        self.help = help or ""
        self.parse = parse
        self.extra = extra
        self.default = default if default is None or not isinstance(default, str) or kind == "string" \
            else self._convert(default, "default")
        self.value = self.default
        self.present = False

    def _convert(self, text, where):
        try:
            return self.parse(text)
        except (ValueError, TypeError) as e:
            shown = f"--{self.name}={text}" if where == "command line" else f"default {text!r} of --{self.name}"
            raise IllegalFlagValueError(f"flag {shown}: {e}") from None

    def __repr__(self):
        return f"Flag({self.kind} --{self.name}={self.value!r})"


def _parse_bool(text):
    t = str(text).strip().lower()
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    raise ValueError(f"expected true/false (or 1/0), got {text!r}")


def _parse_list(text):
    if isinstance(text, (list, tuple)):
        return list(text)
    text = str(text)
    if not text.strip():
        return []
    import csv
    return [s.strip() for s in next(csv.reader([text], strict=True))]


def _bounded(cast, lower, upper, what):
    def parse(text):
        v = cast(text)
        if lower is not None and v < lower:
            raise ValueError(f"{v} is not >= {lower}")
        if upper is not None and v > upper:
            raise ValueError(f"{v} is not <= {upper}")
        return v
    parse.__name__ = what
    return parse


def _int(text):
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    s = str(text).strip()
    try:
        return int(s)
    except ValueError:
        return int(s, 0)        # 0x1f, 0o17, 0b101, as absl's integer parser


class FlagValues:
    """A set of flags and their values (TF1's ``tf.flags.FLAGS`` is one).

    ``FLAGS.name`` reads a value (parsing ``sys.argv`` first if nothing has
    parsed yet); ``FLAGS.name = v`` sets one; ``FLAGS(argv)`` parses a command
    line and returns what is left (``argv[0]`` and the non-flag arguments);
    ``FLAGS["name"]`` is the :class:`Flag`; ``flag_values_dict()`` all values.
    """

    def __init__(self):
        object.__setattr__(self, "_flags", {})
        object.__setattr__(self, "_parsed", False)

    # --- definition --------------------------------------------------------------
    def define(self, flag):
        if flag.name in self._flags:
            raise DuplicateFlagError(f"The flag '{flag.name}' is defined twice.")
        if not flag.name or flag.name.startswith("-") or "=" in flag.name:
            raise FlagsError(f"invalid flag name {flag.name!r}")
        self._flags[flag.name] = flag
        return flag

    # --- values ------------------------------------------------------------------
    def __getattr__(self, name):
        if name == "__flags":
            # TF < 1.5 scripts print their settings from FLAGS.__flags (a name -> value dict then)
            return self.flag_values_dict()
        flags = self.__dict__["_flags"]
        if name not in flags:
            raise AttributeError(f"FLAGS has no flag {name!r}: define it with DEFINE_string, DEFINE_integer, ...")
        if not self._parsed:
            self(sys.argv, known_only=True)
        return flags[name].value

    def __setattr__(self, name, value):
        if name not in self._flags:
            raise AttributeError(f"FLAGS has no flag {name!r} to set: define it with DEFINE_string, DEFINE_integer, "
                                 f"...")
        self._flags[name].value = value

    def __getitem__(self, name):
        try:
            return self._flags[name]
        except KeyError:
            raise KeyError(f"FLAGS has no flag {name!r}") from None

    def __contains__(self, name):
        return name in self._flags

    def __iter__(self):
        return iter(list(self._flags))

    def __len__(self):
        return len(self._flags)

    def flag_values_dict(self):
        """``{name: value}`` of every flag (parsing ``sys.argv`` first if nothing has parsed yet)."""
        if not self._parsed:
            self(sys.argv, known_only=True)
        return {n: f.value for n, f in self._flags.items()}

    def is_parsed(self):
        return self._parsed

    def mark_as_parsed(self):
        """Take the values as they are, without reading ``sys.argv``."""
        object.__setattr__(self, "_parsed", True)

    def unparse_flags(self):
        """Every flag back to its default, and unparsed."""
        for f in self._flags.values():
            f.value, f.present = f.default, False
        object.__setattr__(self, "_parsed", False)

    @staticmethod
    def unknown_flags(args):
        """The names of the flags among ``args`` (what a parse left over), without dashes or values."""
        return [a.lstrip("-").partition("=")[0] for a in args
                if a.startswith("-") and a != "-" and not _is_number(a)]

    def validate_required(self):
        """Raise :class:`IllegalFlagValueError` for a flag marked required that has no value."""
        for f in self._flags.values():
            if f.extra.get("required") and f.value is None:
                raise IllegalFlagValueError(f"Flag --{f.name} must have a value other than None.")

    def _parse_flags(self, args=None):
        """TF < 1.5's name: parse ``args`` (default ``sys.argv``) ignoring unknown flags; returns the rest."""
        return self(sys.argv if args is None else [sys.argv[0]] + list(args), known_only=True)

    # --- parsing -----------------------------------------------------------------
    def parser(self, prog=None, add_help=False):
        """The ``argparse`` parser of these flags (``--name VALUE`` each; booleans
        reach it as ``--name=true|false``, see :meth:`__call__`). With
        ``add_help`` it is the ``--help`` parser, showing the defaults; else
        the parsing one, whose namespace holds only the flags given."""
        import argparse     # on first parse: `import dynnets.static` does not pay for it
        p = argparse.ArgumentParser(prog=prog, add_help=add_help, allow_abbrev=False, exit_on_error=False,
                                    formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        for name, f in self._flags.items():
            extra = ""
            if f.kind == "enum":
                extra = f" (one of: {', '.join(f.extra['enum_values'])})"
            elif f.kind == "bool":
                extra = f" (--{name}/--no{name})"
            p.add_argument(f"--{name}", dest=name, default=f.default if add_help else argparse.SUPPRESS,
                           help=(f.help or " ") + extra, metavar=name.upper())
        return p

    def help_text(self, prog=None):
        """The ``--help`` text: every flag with its help and default."""
        return self.parser(prog, add_help=True).format_help()

    def _normalise(self, args):
        """absl's spellings to argparse's: one dash to two, ``--bool``/``--nobool``
        to ``--bool=true``/``--bool=false`` (a boolean never takes the next argument)."""
        out = []
        for k, a in enumerate(args):
            if a == "--":
                out.extend(args[k:])
                break
            if not a.startswith("-") or a == "-" or _is_number(a):
                out.append(a)
                continue
            body = a.lstrip("-")
            name, eq, val = body.partition("=")
            f = self._flags.get(name)
            if f is not None and f.kind == "bool" and not eq:
                out.append(f"--{name}=true")
            elif f is None and name.startswith("no") and not eq and \
                    getattr(self._flags.get(name[2:]), "kind", None) == "bool":
                out.append(f"--{name[2:]}=false")
            elif f is not None:
                out.append(f"--{body}")
            else:
                out.append(a)
        return out

    def __call__(self, argv, known_only=False):
        """Parse command line ``argv`` (``argv[0]`` is the program) into the flags.

        Returns ``[argv[0]] + `` the arguments that are not flags (and, with
        ``known_only``, the unknown flags). Raises
        :class:`UnrecognizedFlagError` for an unknown flag (unless
        ``known_only``) and :class:`IllegalFlagValueError` for a bad value.
        Flags absent from ``argv`` keep their current values.
        """
        argv = list(argv)
        if not argv:
            raise FlagsError("FLAGS(argv): argv must hold at least the program name")
        args = self._normalise(argv[1:])
        tail = []
        if "--" in args:
            cut = args.index("--")
            args, tail = args[:cut], args[cut + 1:]
        import argparse
        try:
            ns, rest = self.parser(argv[0]).parse_known_args(args)
        except argparse.ArgumentError as e:
            raise IllegalFlagValueError(f"flag {e.argument_name}: {e.message}") from None
        unknown = self.unknown_flags(rest)
        if unknown and not known_only:
            import difflib
            name = unknown[0]
            close = difflib.get_close_matches(name, list(self._flags), n=3)
            hint = f". Did you mean: {', '.join(close)}?" if close else ""
            raise UnrecognizedFlagError(f"Unknown command line flag '{name}'{hint}")
        for name, text in vars(ns).items():
            f = self._flags[name]
            f.value = f._convert(text, "command line")
            f.present = True
        if not known_only:
            self.validate_required()
        object.__setattr__(self, "_parsed", True)
        return [argv[0]] + rest + tail


def _is_number(a):
    try:
        float(a)
        return True
    except ValueError:
        return False


#: The process's flags, as TF1's ``tf.flags.FLAGS``.
FLAGS = FlagValues()


def _define(kind, name, default, help, parse, flag_values, **extra):  # noqa: A002
    return (FLAGS if flag_values is None else flag_values).define(Flag(kind, name, default, help, parse, **extra))


def DEFINE_string(name, default, help, flag_values=None, **kwargs):  # noqa: A002,N802
    """A string flag."""
    return _define("string", name, default, help, str, flag_values)


def DEFINE_integer(name, default, help, lower_bound=None, upper_bound=None, flag_values=None,  # noqa: A002,N802
                   **kwargs):
    """An integer flag, optionally bounded (``lower_bound <= value <= upper_bound``)."""
    return _define("integer", name, default, help, _bounded(_int, lower_bound, upper_bound, "integer"), flag_values)


def DEFINE_float(name, default, help, lower_bound=None, upper_bound=None, flag_values=None, **kwargs):  # noqa: A002,N802
    """A float flag, optionally bounded."""
    return _define("float", name, default, help, _bounded(float, lower_bound, upper_bound, "float"), flag_values)


def DEFINE_boolean(name, default, help, flag_values=None, **kwargs):  # noqa: A002,N802
    """A boolean flag: ``--name``, ``--noname``, ``--name=true|false|1|0``."""
    return _define("bool", name, default, help, _parse_bool, flag_values)


DEFINE_bool = DEFINE_boolean


def DEFINE_list(name, default, help, flag_values=None, **kwargs):  # noqa: A002,N802
    """A list of strings, given comma-separated (``--layers=64,32``); the default a list or such a string."""
    return _define("list", name, default, help, _parse_list, flag_values)


def DEFINE_enum(name, default, enum_values, help, flag_values=None, **kwargs):  # noqa: A002,N802
    """A string flag that must be one of ``enum_values``."""
    values = list(enum_values)

    def parse(text):
        if text not in values:
            raise ValueError(f"value should be one of <{'|'.join(values)}>")
        return text
    f = _define("enum", name, None, help, parse, flag_values, enum_values=values)
    if default is not None:
        f.default = f.value = f._convert(default, "default")
    return f


def mark_flag_as_required(name, flag_values=None):
    """``app.run`` refuses to start unless the command line sets ``name`` (a value other than None)."""
    fv = FLAGS if flag_values is None else flag_values
    fv[name].extra["required"] = True
