"""TF1's program scaffolding: ``ConfigProto`` / ``Session(config=)``,
``tf.device``, ``tf.flags`` / ``tf.app.run`` and ``tf.logging``: accepted
where TF1 code needs them, the same results with and without them, and clear
errors for misspelt fields, malformed device strings, unknown flags and bad
values."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dynnets.static as tf
from dynnets.static import flags as tfflags


def _linreg(config=None, device=None):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, (None, 2), name="x")
        y = tf.placeholder(tf.float32, (None,), name="y")
        w = tf.Variable(np.zeros(2, np.float32))
        if device is None:
            loss = tf.reduce_mean(tf.square(tf.reduce_sum(x * w, axis=1) - y))
        else:
            with tf.device(device):
                loss = tf.reduce_mean(tf.square(tf.reduce_sum(x * w, axis=1) - y))
        step = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        xs = np.random.default_rng(0).standard_normal((16, 2)).astype(np.float32)
        ys = xs @ np.array([1.0, -2.0], np.float32)
        with tf.Session(graph=g, config=config) as sess:
            sess.run(tf.global_variables_initializer())
            losses = [sess.run([loss, step], {x: xs, y: ys})[0] for _ in range(5)]
            return losses, sess


def test_config_proto_is_accepted_and_changes_nothing():
    config = tf.ConfigProto(allow_soft_placement=True, log_device_placement=True, device_count={"GPU": 0},
                            intra_op_parallelism_threads=1, inter_op_parallelism_threads=1,
                            gpu_options=tf.GPUOptions(per_process_gpu_memory_fraction=0.5))
    config.gpu_options.allow_growth = True
    assert config.gpu_options.allow_growth is True and config.gpu_options.per_process_gpu_memory_fraction == 0.5
    assert config.device_count == {"GPU": 0} and config.intra_op_parallelism_threads == 1
    assert tf.ConfigProto().allow_soft_placement is False and tf.ConfigProto().gpu_options.allow_growth is False
    want, _ = _linreg()
    got, sess = _linreg(config)
    assert got == want and sess.config is config
    assert tf.InteractiveSession(config=config).config is config
    tf.get_default_session().close()


def test_config_proto_refuses_what_protobuf_refuses():
    with pytest.raises(ValueError, match='Protocol message ConfigProto has no "allow_soft_placment" field'):
        tf.ConfigProto(allow_soft_placment=True)
    config = tf.ConfigProto()
    with pytest.raises(AttributeError, match="GPUOptions has no field 'allow_grow'"):
        config.gpu_options.allow_grow = True
    with pytest.raises(TypeError, match="intra_op_parallelism_threads: '2' has type str"):
        config.intra_op_parallelism_threads = "2"
    with pytest.raises(TypeError, match="allow_soft_placement"):
        tf.ConfigProto(allow_soft_placement="yes")
    config.gpu_options = tf.GPUOptions(allow_growth=True)       # a whole sub-message copies in
    assert config.gpu_options.allow_growth is True and config == tf.ConfigProto(gpu_options=tf.GPUOptions(
        allow_growth=True))


@pytest.mark.parametrize("spec", ["/cpu:0", "/gpu:0", "/device:GPU:1", "/job:localhost/replica:0/task:0/device:CPU:0",
                                  "/job:ps/task:1", "gpu:*", "", None, lambda op: "/cpu:0"])
def test_device_is_a_no_op_context(spec):
    want, _ = _linreg()
    assert _linreg(device=spec)[0] == want


@pytest.mark.parametrize("spec", ["/gpu:zero", "/foo:0", "/device:GPU:1:2", "cuda:0"])
def test_device_strings_are_checked(spec):
    with pytest.raises(ValueError, match="device: unknown attribute"):
        with tf.device(spec):
            pass
    with pytest.raises(TypeError, match="expected a device string"):
        with tf.device(0):
            pass


# --------------------------------------------------------------------------
# flags and app.run
# --------------------------------------------------------------------------

def _flags():
    fv = tfflags.FlagValues()
    tfflags.DEFINE_string("name", "run", "Run name", flag_values=fv)
    tfflags.DEFINE_integer("batch_size", 64, "Batch size", lower_bound=1, flag_values=fv)
    tfflags.DEFINE_float("learning_rate", 1e-3, "Learning rate", flag_values=fv)
    tfflags.DEFINE_boolean("shuffle", True, "Shuffle", flag_values=fv)
    tfflags.DEFINE_bool("verbose", False, "Talk", flag_values=fv)
    tfflags.DEFINE_list("layers", "64,32", "Layer sizes", flag_values=fv)
    tfflags.DEFINE_enum("cell", "lstm", ["lstm", "gru"], "Cell", flag_values=fv)
    return fv


def test_defaults_and_types():
    fv = _flags()
    fv.mark_as_parsed()
    assert fv.flag_values_dict() == {"name": "run", "batch_size": 64, "learning_rate": 1e-3, "shuffle": True,
                                     "verbose": False, "layers": ["64", "32"], "cell": "lstm"}
    assert fv["batch_size"].help == "Batch size" and "batch_size" in fv and len(fv) == 7


@pytest.mark.parametrize("argv,want", [
    (["--batch_size=32", "--learning_rate", "0.5"], dict(batch_size=32, learning_rate=0.5)),
    (["-batch_size=8", "-name", "x y"], dict(batch_size=8, name="x y")),
    (["--noshuffle", "--verbose"], dict(shuffle=False, verbose=True)),
    (["--shuffle=false", "--verbose=1"], dict(shuffle=False, verbose=True)),
    (["--layers=128, 64,8", "--cell=gru"], dict(layers=["128", "64", "8"], cell="gru")),
    (["--layers="], dict(layers=[])),
    (["--learning_rate=-0.5", "--batch_size", "0x10"], dict(learning_rate=-0.5, batch_size=16)),
])
def test_command_lines(argv, want):
    fv = _flags()
    rest = fv(["prog"] + argv)
    assert rest == ["prog"]
    got = fv.flag_values_dict()
    assert {k: got[k] for k in want} == want
    assert all(fv[k].present for k in want)


def test_positional_arguments_and_double_dash_pass_through():
    fv = _flags()
    assert fv(["prog", "in.txt", "--batch_size=2", "out.txt", "--", "--name=x"]) == ["prog", "in.txt", "out.txt",
                                                                                        "--name=x"]
    assert fv.batch_size == 2 and fv.name == "run"
    # a boolean never takes the next argument (absl's rule)
    fv = _flags()
    assert fv(["prog", "--verbose", "false"]) == ["prog", "false"] and fv.verbose is True


@pytest.mark.parametrize("argv,match", [
    (["--batch_sise=3"], r"Unknown command line flag 'batch_sise'. Did you mean: batch_size\?"),
    (["--batch_size=x"], r"flag --batch_size=x: invalid literal"),
    (["--batch_size=0"], r"flag --batch_size=0: 0 is not >= 1"),
    (["--shuffle=maybe"], r"flag --shuffle=maybe: expected true/false"),
    (["--cell=rnn"], r"flag --cell=rnn: value should be one of <lstm\|gru>"),
    (["--name"], r"flag --name: expected one argument"),
])
def test_bad_command_lines_name_the_flag(argv, match):
    with pytest.raises(tfflags.FlagsError, match=match):
        _flags()(["prog"] + argv)


def test_lazy_parse_reads_sys_argv_once_and_ignores_unknown_flags(monkeypatch):
    fv = _flags()
    monkeypatch.setattr(sys, "argv", ["prog", "--batch_size=5", "--some_runner_flag", "-x"])
    assert not fv.is_parsed() and fv.batch_size == 5 and fv.is_parsed()
    monkeypatch.setattr(sys, "argv", ["prog", "--batch_size=7"])
    assert fv.batch_size == 5
    fv.batch_size = 9
    assert fv.batch_size == 9
    fv.unparse_flags()
    assert fv.batch_size == 7
    # TF < 1.5's spellings
    fv = _flags()
    monkeypatch.setattr(sys, "argv", ["prog", "--name=old"])
    fv._parse_flags()
    assert getattr(fv, "__flags")["name"] == "old"


def test_flag_definition_errors():
    fv = _flags()
    with pytest.raises(tfflags.DuplicateFlagError, match="The flag 'name' is defined twice"):
        tfflags.DEFINE_string("name", "x", "again", flag_values=fv)
    with pytest.raises(tfflags.IllegalFlagValueError, match="default 'many' of --n"):
        tfflags.DEFINE_integer("n", "many", "count", flag_values=fv)
    with pytest.raises(AttributeError, match="FLAGS has no flag 'nope'"):
        fv.nope
    with pytest.raises(AttributeError, match="FLAGS has no flag 'nope' to set"):
        fv.nope = 1


def test_app_run(monkeypatch, capsys):
    fv = _flags()
    seen = []
    with pytest.raises(SystemExit) as e:
        tf.app.run(main=lambda argv: seen.append((argv, fv.batch_size, fv.shuffle)) or 3,
                   argv=["prog", "--batch_size=4", "--noshuffle", "data.txt"], flag_values=fv)
    assert e.value.code == 3 and seen == [(["prog", "data.txt"], 4, False)]
    # TF1's run passes unknown flags on to main (known_only=True); a warning names them
    seen.clear()
    fv = _flags()
    with pytest.raises(SystemExit) as e:
        tf.app.run(main=lambda argv: seen.append((argv, fv.batch_size)) or 0,
                   argv=["prog", "--bach_size=4", "--batch_size=2", "x"], flag_values=fv)
    assert e.value.code == 0 and seen == [(["prog", "--bach_size=4", "x"], 2)]
    err = capsys.readouterr().err
    assert "unknown command line flag 'bach_size' passed on to main (did you mean: batch_size?)" in err
    with pytest.raises(SystemExit) as e:
        tf.app.run(main=lambda argv: 0, argv=["prog", "--batch_size=four"], flag_values=_flags())
    assert e.value.code == 1 and "FATAL Flags parsing error" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        tf.app.run(main=lambda argv: 0, argv=["prog", "--help"], flag_values=_flags())
    out = capsys.readouterr().out
    assert e.value.code == 0
    for text in ("--batch_size", "Batch size", "(default: 64)", "--learning_rate", "one of: lstm, gru", "--noshuffle"):
        assert text in out
    fv = _flags()
    tfflags.DEFINE_string("data_dir", None, "Data", flag_values=fv)
    tfflags.mark_flag_as_required("data_dir", flag_values=fv)
    with pytest.raises(SystemExit) as e:
        tf.app.run(main=lambda argv: 0, argv=["prog"], flag_values=fv)
    assert e.value.code == 1 and "Flag --data_dir must have a value other than None" in capsys.readouterr().err


def test_app_run_in_a_script(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent('''
        import dynnets.static as tf
        tf.flags.DEFINE_integer("epochs", 3, "Epochs")
        tf.app.flags.DEFINE_string("out", "x", "Output")
        FLAGS = tf.flags.FLAGS

        def main(argv):
            tf.logging.set_verbosity(tf.logging.INFO)
            tf.logging.info("epochs=%d out=%s rest=%s", FLAGS.epochs, FLAGS.out, argv[1:])
            tf.logging.debug("not shown")

        if __name__ == "__main__":
            tf.app.run()
    '''))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    run = subprocess.run([sys.executable, str(script), "--epochs=5", "pos"], capture_output=True, text=True, env=env,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert "INFO:dynnets.static:epochs=5 out=x rest=['pos']" in run.stderr and "not shown" not in run.stderr
    bad = subprocess.run([sys.executable, str(script), "--epoch=5"], capture_output=True, text=True, env=env,
                         timeout=300)
    assert bad.returncode == 0 and "unknown command line flag 'epoch' passed on to main (did you mean: epochs?)" \
        in bad.stderr and "epochs=3 out=x rest=['--epoch=5']" in bad.stderr
    helped = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, env=env,
                            timeout=300)
    assert helped.returncode == 0 and "--epochs" in helped.stdout and "(default: 3)" in helped.stdout


# --------------------------------------------------------------------------
# logging
# --------------------------------------------------------------------------

def test_logging_levels_and_formatting(caplog):
    old = tf.logging.get_verbosity()
    try:
        with caplog.at_level(logging.DEBUG, logger="dynnets.static"):
            tf.logging.set_verbosity(tf.logging.WARN)
            assert tf.logging.get_verbosity() == tf.logging.WARN == logging.WARNING
            tf.logging.info("hidden %d", 1)
            tf.logging.set_verbosity(tf.logging.INFO)
            tf.logging.info("step %d loss %.2f", 3, 0.5)
            tf.logging.warn("careful")
            tf.logging.error("bad")
            tf.logging.fatal("worse")
            for k in range(5):
                tf.logging.log_every_n(tf.logging.INFO, "every %d", 2, k)
                tf.logging.log_first_n(tf.logging.INFO, "first %d", 1, k)
        msgs = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "dynnets.static"]
        assert ("INFO", "hidden 1") not in msgs
        assert msgs == [("INFO", "step 3 loss 0.50"), ("WARNING", "careful"), ("ERROR", "bad"), ("CRITICAL", "worse"),
                        ("INFO", "every 0"), ("INFO", "first 0"), ("INFO", "every 2"), ("INFO", "every 4")]
    finally:
        tf.logging.set_verbosity(old)
