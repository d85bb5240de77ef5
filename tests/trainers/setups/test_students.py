"""students.StudentSetup: the teacher and the student's hooks, one definition serving both
--setup=distill and --setup=dfad."""

import pytest

from datasets import registry as datasets
from trainers.config.flags import Config, ConfigError
from trainers.setups import registry, students
from trainers.setups.dfad import DataFreeDistillation
from trainers.setups.distill import Distillation
from trainers.setups.protocol import LearningRate

# dfad extends learning_rates with its generator's (tested below).
SHARED_HOOKS = ("check_data", "periodic_evaluation", "evaluate", "export_archive")


@pytest.mark.parametrize("setup", [Distillation, DataFreeDistillation])
def test_both_student_setups_take_every_student_hook_from_the_base(setup):
    assert issubclass(setup, students.StudentSetup)
    assert setup.metrics == students.METRICS == ("student_accuracy", "teacher_accuracy",
                                                 "agreement")
    for hook in SHARED_HOOKS:
        assert getattr(setup, hook) is getattr(students.StudentSetup, hook), hook
    # dfad refuses sampling with its own reason (its generator); distill with the base's.
    assert (setup.sample is students.StudentSetup.sample) == (setup is Distillation)
    assert (setup.learning_rates is students.StudentSetup.learning_rates) == (setup is Distillation)


@pytest.mark.parametrize("name", ["distill", "dfad"])
def test_both_refuse_a_toy_and_the_discriminators_flags(name):
    config = registry.resolve(Config(setup=name, dataset="ring8"))
    with pytest.raises(ConfigError, match=rf"--dataset='ring8' has toy data \(2-D points\); "
                                          rf"--setup={name} trains a classifier"):
        registry.get(name).check_data(config, datasets.dataset_info("ring8"))
    with pytest.raises(ConfigError, match=rf"--d_width=32 is invalid: only --setup=\S+ reads it "
                                          rf"and this run is --setup={name}"):
        registry.resolve(Config(setup=name, d_width=32))


def test_the_students_rate_is_student_lr_and_dfad_adds_its_generators():
    config = registry.resolve(Config(setup="dfad", student_lr=3e-4, g_lr=2e-3))
    assert Distillation().learning_rates(config) == {"student": LearningRate(3e-4, "constant")}
    assert DataFreeDistillation().learning_rates(config) == {
        "student": LearningRate(3e-4, "constant"), "generator": LearningRate(2e-3, "constant")}
