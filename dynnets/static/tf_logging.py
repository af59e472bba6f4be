"""``tf.logging``: TF1's logging functions over Python's :mod:`logging`.

The messages go to the logger ``"dynnets.static"``; its level is
:func:`set_verbosity`'s (TF1's default: ``WARN``, so ``tf.logging.info`` is
silent until ``tf.logging.set_verbosity(tf.logging.INFO)``). Where neither
that logger nor the root logger has a handler when the first message is
logged, one is added that writes ``INFO:dynnets.static:message`` lines to
standard error, as TF1 writes its ``INFO:tensorflow:...``; a program that
configures :mod:`logging` itself gets the records through its own handlers.
Messages are ``%``-formatted with their arguments, as TF1's.
"""
from __future__ import annotations

import logging as _logging
import sys

__all__ = ["DEBUG", "INFO", "WARN", "WARNING", "ERROR", "FATAL", "set_verbosity", "get_verbosity", "debug", "info",
           "warn", "warning", "error", "fatal", "log", "vlog", "log_every_n", "log_first_n", "log_if", "flush",
           "get_logger"]

DEBUG = _logging.DEBUG
INFO = _logging.INFO
WARN = _logging.WARN
WARNING = _logging.WARNING
ERROR = _logging.ERROR
FATAL = _logging.FATAL

_logger = _logging.getLogger("dynnets.static")
_logger.setLevel(WARN)
_counts = {}


def get_logger():
    """The :class:`logging.Logger` the functions write to (with its stderr
    handler, where the program configured none)."""
    if not _logger.handlers and not _logging.getLogger().handlers:
        handler = _logging.StreamHandler(sys.stderr)
        handler.setFormatter(_logging.Formatter(_logging.BASIC_FORMAT))
        _logger.addHandler(handler)
        # the program may configure the root logger later; one line per message all the same
        _logger.propagate = False
    return _logger


def set_verbosity(v):
    """Log messages of level ``v`` (``DEBUG``, ``INFO``, ``WARN``, ``ERROR``, ``FATAL``) and above."""
    _logger.setLevel(v)


def get_verbosity():
    return _logger.getEffectiveLevel()


def log(level, msg, *args, **kwargs):
    get_logger().log(level, msg, *args, **kwargs)


def debug(msg, *args, **kwargs):
    log(DEBUG, msg, *args, **kwargs)


def info(msg, *args, **kwargs):
    log(INFO, msg, *args, **kwargs)


def warning(msg, *args, **kwargs):
    log(WARNING, msg, *args, **kwargs)


warn = warning


def error(msg, *args, **kwargs):
    log(ERROR, msg, *args, **kwargs)


def fatal(msg, *args, **kwargs):
    """Log at ``FATAL`` (it does not stop the program, as TF1's does not)."""
    log(FATAL, msg, *args, **kwargs)


def vlog(level, msg, *args):
    log(level, msg, *args)


def _caller_count():
    f = sys._getframe(2)
    key = (f.f_code.co_filename, f.f_lineno)
    n = _counts.get(key, 0)
    _counts[key] = n + 1
    return n


def log_every_n(level, msg, n, *args):
    """Log on the 1st, (n+1)-th, (2n+1)-th... call from the same line."""
    if _caller_count() % max(int(n), 1) == 0:
        log(level, msg, *args)


def log_first_n(level, msg, n, *args):
    """Log on the first ``n`` calls from the same line only."""
    if _caller_count() < n:
        log(level, msg, *args)


def log_if(level, msg, condition, *args):
    if condition:
        log(level, msg, *args)


def flush():
    """Flush the handlers."""
    for h in get_logger().handlers:
        h.flush()
