"""Which flags are a run's hparams (pure Python)."""

from trainers.config.flags import Config, declared
from trainers.config.hparams import hparam_specs, hparam_values


def test_the_columns_are_the_flags_declared_hparams_and_paths_are_left_out():
    columns = {spec.name for spec in hparam_specs()}
    assert columns == {name for name, flag in declared().items() if flag.hparam and not flag.path}
    assert not columns & {"logdir", "data_dir", "fashion_mnist_dir", "evaluator_dir", "export_dir",
                          "output", "mode", "num_samples", "cycles_per_loop"}
    assert {"setup", "g_lr", "batch_size", "seed", "eval_samples", "evaluator", "topk"} <= columns


def test_specs_carry_value_types_choices_and_help():
    specs = {spec.name: spec for spec in hparam_specs()}
    assert specs["g_lr"].kind is float and specs["batch_size"].kind is float  # ints are numbers
    assert specs["d_spectral_norm"].kind is bool and specs["setup"].kind is str
    assert specs["precision"].choices == ("float32", "mixed_bfloat16", "mixed_float16", "auto")
    assert specs["seed"].description.startswith("Seed for weight initialisation")


def test_values_leave_out_none_and_keep_python_types():
    values = hparam_values(Config(g_lr=1e-3, seed=4))
    assert values["g_lr"] == 1e-3 and values["seed"] == 4 and values["use_ema"] is True
    assert "resolution" not in values and "d_lr" not in values  # None: unset
    assert set(values) <= {spec.name for spec in hparam_specs()}
